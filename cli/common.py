"""Helpers shared by the command groups: a transaction, lookups that fail with a clear message."""
from contextlib import contextmanager
from datetime import datetime, timezone

import click
from flask import current_app

from models import db, deadline, organizations
from rendering.ids import parse_id


@contextmanager
def transaction():
    """A connection whose work is committed when the block ends without error.

    A database that cannot be reached (a wrong URL, a server away, one that never answers: the connect
    timeout) is a one-line error for every command, not a traceback, and so is one lost or not
    answering during the command. With a statement timeout (CLI_STATEMENT_TIMEOUT), a statement that
    never reaches the server (queued in a pooler) is given up a little after it too (models/deadline.py).
    """
    target = db.Target.from_config(current_app.config, "cli")
    with deadline.installed(*deadline.beyond(target.statement_timeout, "CLI_STATEMENT_TIMEOUT")):
        try:
            conn = db.connect(target)
        except db.DatabaseUnavailable as error:  # refused, unreachable, not answering, or not a URL at all
            setup = "a setup error (to fix: it does not pass by itself): " if isinstance(error, db.DatabaseSetupError) else ""
            raise click.ClickException(f"cannot connect to the database: {setup}{error}") from None
        try:
            with _lost_in_one_line(conn, "nothing was committed"):
                yield conn
            with _lost_in_one_line(conn, "whether the command's changes were committed is unknown"):
                conn.commit()
        finally:
            conn.close()


@contextmanager
def _lost_in_one_line(conn, outcome):
    try:
        yield
    except db.DatabaseUnavailable as error:
        raise click.ClickException(f"the database stopped answering ({outcome}): {error}") from None


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
        raise click.ClickException(f"{email} is {with_article(member['role'])} of {organization['slug']}; "
                                   f"this needs one of: {', '.join(roles)}")
    return member


def require_id(value, prefix, noun):
    """The integer of a `<prefix>_<n>` id given on the command line."""
    object_id = parse_id(value, prefix)
    if object_id is None:
        raise click.BadParameter(f"{value!r} is not a {noun} id ({prefix}_<n>)")
    return object_id


def with_article(role):
    """`an owner`, `an admin`, `a member`."""
    return f"{'an' if role[:1] in 'aeiou' else 'a'} {role}"


def cut(text, width):
    """`text` if it has at most `width` characters, else its start and `...` in `width`."""
    return text if len(text) <= width else f"{text[:width - 3]}..."


def print_table(rows, columns, details=None):
    """Print rows as an aligned text table; `details(row)` gives the lines printed indented under a row."""
    text = [[("" if row[c] is None else str(row[c])) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in text]) for i, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip())
    for row, r in zip(rows, text):
        click.echo("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
        for line in (details(row) if details else ()):
            click.echo(f"  {line}")


def format_when(value):
    """A time as the commands print and `--since` reads it: UTC, to the second, Z suffix."""
    return None if value is None else value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_since(value):
    """Parse `--since`: ISO 8601; a time without an offset is UTC."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a time like 2026-10-01T08:00:00Z", param_hint="--since") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
