"""`flask demo seed`: demo organizations with realistic shipments (see docs/demo-data.md)."""
import click
from flask import current_app
from flask.cli import AppGroup

from demo.seed import seed as run_seed
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
def seed(count, other, seed_value, reset):
    """Create organizations acme and globex with members and shipments (no API tokens)."""
    conn = db.connect(current_app.config["DATABASE_URL"])
    try:
        results = run_seed(conn, current_app.config["STORAGE_DIR"], count, other, seed_value, reset, click.echo)
    finally:
        conn.close()
    for slug, counts in results.items():
        click.echo(f"{slug}: members owner@{slug}.example, admin@{slug}.example, member@{slug}.example; "
                   + ", ".join(f"{n} {table}" for table, n in counts.items()))
    if results:
        click.echo("Create a token with: flask --app app tokens create --org acme --user owner@acme.example "
                   "--name demo --expires 30d")
