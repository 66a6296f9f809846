"""`flask db init`: apply schema.sql (harmless to repeat)."""
import click
from flask.cli import AppGroup

from cli.common import transaction
from models import db

db_cli = AppGroup("db", help="Database schema.")


@db_cli.command("init")
def init():
    """Create every table, index, view and trigger; safe to run again."""
    with transaction() as conn:
        db.apply_schema(conn)
    click.echo("schema applied")
