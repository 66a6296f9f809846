"""Helpers shared by the command groups: a transaction, lookups that fail with a clear message."""
from contextlib import contextmanager

import click
import psycopg2
from flask import current_app

from api.ids import parse_id
from models import db, organizations


@contextmanager
def transaction():
    """A connection whose work is committed when the block ends without error.

    A database that cannot be reached (a wrong URL, a server away) is a one-line error for every
    command, not a traceback.
    """
    try:
        conn = db.connect(db.Target.from_config(current_app.config, "cli"))
    except psycopg2.Error as error:           # refused, unreachable, or not a URL at all (ProgrammingError)
        setup = "a setup error (to fix: it does not pass by itself): " if db.classify(error) == db.SETUP else ""
        raise click.ClickException(f"cannot connect to the database: {setup}{db.describe(error)}") from None
    try:
        yield conn
        conn.commit()
    finally:
        conn.close()


def require_organization(conn, slug):
    """The organization with this slug, or a usage error."""
    found = organizations.get_organization_by_slug(conn, slug)
    if found is None:
        raise click.ClickException(f"no organization with slug {slug!r}")
    return found


def require_member(conn, organization, email, roles=organizations.ROLES):
    """The current membership of `email`, or an error; with `roles`, the member must hold one of them."""
    member = organizations.get_membership(conn, organization["id"], email)
    if member is None:
        raise click.ClickException(f"{email} is not a member of {organization['slug']}")
    if member["role"] not in roles:
        raise click.ClickException(f"{email} is a {member['role']} of {organization['slug']}; "
                                   f"this needs one of: {', '.join(roles)}")
    return member


def require_id(value, prefix, noun):
    """The integer of a `<prefix>_<n>` id given on the command line."""
    object_id = parse_id(value, prefix)
    if object_id is None:
        raise click.BadParameter(f"{value!r} is not a {noun} id ({prefix}_<n>)")
    return object_id


def print_table(rows, columns):
    """Print rows as an aligned text table."""
    text = [[("" if row[c] is None else str(row[c])) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in text]) for i, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    for r in text:
        click.echo("  ".join(v.ljust(w) for v, w in zip(r, widths)))
