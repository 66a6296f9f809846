"""`flask demo seed`: demo organizations with realistic shipments (docs/demo-data.md); `flask demo simulate`:
a few of them change every few seconds (docs/demo.md); `flask demo certificate`: a certificate the demo's
delivery trusts, for a receiver of your own (docs/receiving-webhooks.md, "Testing locally")."""
import os
import random
import signal
import time
from datetime import datetime, timezone
from pathlib import Path

import click
from flask import current_app
from flask.cli import AppGroup

from demo import certificates, launch, simulator
from demo.batches import BATCH_SIZE
from demo.seed import Options, seed as run_seed
from models import db

demo_cli = AppGroup("demo", help="Demo data.")


@demo_cli.command("seed")
@click.option("--shipments", "count", type=click.IntRange(0, 1_048_575), default=300, show_default=True,
              help="Shipments of acme (globex gets its own smaller set).")
@click.option("--globex-shipments", "other", type=click.IntRange(0, 1_048_575), default=40, show_default=True,
              help="Shipments of globex.")
@click.option("--seed", "seed_value", type=int, default=1, show_default=True,
              help="Random seed: the same seed gives the same data (relative to today).")
@click.option("--reset", is_flag=True, help="Delete the demo organizations' data first and recreate them.")
@click.option("--workers", type=click.IntRange(1, 32), default=min(4, os.cpu_count() or 1), show_default=True,
              help="Processes loading batches side by side (large seeds only).")
@click.option("--now", type=click.DateTime(["%Y-%m-%dT%H:%M"]), default=None,
              help="Pretend it is this UTC minute (default: now); with --seed, the same data every run.")
@click.option("--batch-size", type=click.IntRange(1, 100_000), default=BATCH_SIZE, hidden=True)
def seed(count, other, seed_value, reset, workers, now, batch_size):
    """Create organizations acme and globex with members and shipments (no API tokens)."""
    options = Options(count, other, seed_value, reset, workers, now and now.replace(tzinfo=timezone.utc), batch_size)
    results = run_seed(current_app.config["DATABASE_URL"], current_app.config["STORAGE_DIR"], options, click.echo)
    for slug, counts in results.items():
        click.echo(f"{slug}: members owner@{slug}.example, admin@{slug}.example, member@{slug}.example; "
                   + ", ".join(f"{n} {table}" for table, n in counts.items()))
    if results:
        click.echo("Create a token with: flask --app app tokens create --org acme --user owner@acme.example "
                   "--name demo --expires 30d")


@demo_cli.command("simulate")
@click.option("--org", "slug", default="acme", show_default=True, help="The organization whose shipments change.")
@click.option("--every", type=click.FloatRange(min=0.1), default=5.0, show_default=True,
              help="Seconds between steps.")
@click.option("--steps", type=click.IntRange(min=1), default=None, help="Stop after this many steps (default: "
                                                                          "until Ctrl-C or SIGTERM).")
@click.option("--seed", "seed_value", type=int, default=None, help="Random seed, for the same choices every run.")
def simulate(slug, every, steps, seed_value):
    """Ship a few shipments from booking to the warehouse, as the organization's application would write them
    (statuses, tracking events, ETAs, checks, alerts), so that /changes, /events and webhooks move."""
    rng = random.Random(seed_value)
    stopping = []
    # A SIGTERM ends the loop between steps, so no change is cut in half.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stopping.append(True))
    conn = db.connect(current_app.config["DATABASE_URL"])
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT id, slug FROM organizations WHERE slug = %(slug)s", {"slug": slug})
            org = cur.fetchone()
        conn.commit()
        if org is None:
            raise click.ClickException(f"no organization {slug} (make it with: flask --app app demo seed)")
        done, cast = 0, {}
        while not stopping and (steps is None or done < steps):
            for line in simulator.step(conn, org, cast, datetime.now(timezone.utc), rng):
                click.echo(f"simulator {datetime.now(timezone.utc):%H:%M:%S} {line}")
            done += 1
            deadline = time.monotonic() + every
            while not stopping and (steps is None or done < steps) and time.monotonic() < deadline:
                time.sleep(min(0.2, every))
    except LookupError as error:
        raise click.ClickException(str(error)) from None
    except KeyboardInterrupt:
        pass
    finally:
        conn.close()


@demo_cli.command("certificate")
def certificate():
    """Write a certificate and key for 127.0.0.1 and localhost, signed by the demo's CA, for your own receiver."""
    ca, made = certificates.authority(launch.DEMO_DIR)
    cert_path, key_path = launch.DEMO_DIR / "localhost.pem", launch.DEMO_DIR / "localhost-key.pem"
    certificates.issue(ca, cert_path, key_path)
    root = Path.cwd()
    shown = [path.relative_to(root) if path.is_relative_to(root) else path
             for path in (cert_path, key_path, launch.DEMO_DIR / certificates.CA_FILE)]
    click.echo(f"certificate {shown[0]} and key {shown[1]} for {' and '.join(certificates.NAMES)}, "
               f"signed by the demo's CA {shown[2]}")
    if made:
        click.echo("the demo's CA was made just now: restart a demo that is running, so its delivery trusts it")
