"""`flask secrets ...`: the key that encrypts webhook endpoint secrets at rest (docs/secret-key.md)."""
from contextlib import contextmanager

import click
from flask import current_app
from flask.cli import AppGroup

from cli.common import transaction
from delivery import secret_key
from models import endpoint_secrets

secrets_cli = AppGroup("secrets", help="The secret key of webhook endpoint secrets: make one, encrypt with it, "
                                       "rotate to a new one.")


@contextmanager
def secret_keys(conn):
    """The deployment's keys, checked against the stored secrets; a key that cannot serve is the one error line."""
    try:
        keys = current_app.extensions["secret_keys"]
        secret_key.check(conn, keys)
        yield keys
    except secret_key.SecretKeyError as error:
        raise click.ClickException(str(error)) from None


def key_notice(conn=None):
    """The line a schema command adds: NO_KEY without a key; with `conn`, whatever the start check says."""
    keys = current_app.extensions["secret_keys"]
    if conn is None:
        return None if keys.configured else secret_key.NO_KEY
    try:
        return secret_key.check(conn, keys)
    except secret_key.SecretKeyError as error:
        raise click.ClickException(str(error)) from None


@secrets_cli.command("new-key")
def new_key():
    """Print a new secret key, to set as SHIPTRACK_SECRET_KEY (or write to SHIPTRACK_SECRET_KEY_FILE)."""
    click.echo(secret_key.new_key())


@secrets_cli.command("encrypt")
def encrypt():
    """Encrypt every secret still stored as plain text with the current key (a deployment that had none)."""
    _reseal(only_plain=True, done="encrypted {count} webhook endpoint secrets stored as plain text")


@secrets_cli.command("rotate")
def rotate():
    """Re-encrypt every secret with the current key; SHIPTRACK_SECRET_KEY_OLD holds the key they were under."""
    _reseal(only_plain=False, done="re-encrypted {count} webhook endpoint secrets with the current key; "
                                   "SHIPTRACK_SECRET_KEY_OLD is no longer needed")


def _reseal(only_plain, done):
    """Seal the chosen stored secrets again under the current key, all in one transaction (or none)."""
    keys = current_app.extensions["secret_keys"]
    if not keys.configured:
        raise click.ClickException(f"no secret key is set: make one with `{secret_key.NEW_KEY_COMMAND}` and set it "
                                   f"as SHIPTRACK_SECRET_KEY ({secret_key.DOCS})")
    with transaction() as conn, secret_keys(conn):
        stored = endpoint_secrets.lock_all(conn, only_plain)
        count = endpoint_secrets.store_all(conn, [(id_, keys.reseal(value)) for id_, value in stored])
    click.echo(done.format(count=count))
