"""`flask demo seed`: demo organizations with realistic shipments (see docs/demo-data.md)."""
import os
from datetime import timezone

import click
from flask import current_app
from flask.cli import AppGroup

from demo.batches import BATCH_SIZE
from demo.seed import Options, seed as run_seed

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
