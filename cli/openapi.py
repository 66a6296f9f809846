"""`flask openapi print`: the OpenAPI description the API serves at /openapi.json."""
import json

import click
from flask import current_app
from flask.cli import AppGroup

from api.openapi import build_spec

openapi_cli = AppGroup("openapi", help="The OpenAPI description.")


@openapi_cli.command("print")
def print_document():
    """Write the OpenAPI 3.1 document as indented JSON to standard output."""
    # Same keys in the same order as /openapi.json, only indented for reading and diffing.
    click.echo(json.dumps(build_spec(current_app._get_current_object()), indent=2))
