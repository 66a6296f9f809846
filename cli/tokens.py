"""`flask tokens ...`: API tokens, as the application settings manage them."""
import click
from flask.cli import AppGroup

from cli.common import print_table, require_id, require_member, require_organization, transaction
from models import tokens
from rendering.ids import PREFIXES, format_id

tokens_cli = AppGroup("tokens", help="API tokens.")


@tokens_cli.command("create")
@click.option("--org", "slug", required=True)
@click.option("--user", "email", required=True, help="The member creating the token for themself.")
@click.option("--name", required=True)
@click.option("--expires", type=click.Choice(list(tokens.EXPIRIES)), required=True)
@click.option("--replace", is_flag=True, help="First revoke this user's active tokens of the same name.")
def create(slug, email, name, expires, replace):
    """Create a token; prints only its value, shown this once."""
    if not name.strip():
        raise click.BadParameter("the name must not be blank", param_hint="--name")
    with transaction() as conn:
        org = require_organization(conn, slug)
        member = require_member(conn, org, email)
        if replace:
            tokens.revoke_named(conn, org["id"], member["user_id"], name.strip())
        try:
            value, row = tokens.create_token(conn, org["id"], member["user_id"], name.strip(), expires)
        except tokens.TokenLimitReached as error:
            raise click.ClickException(str(error))
    click.echo(value)
    click.echo(f"created {format_id(PREFIXES['token'], row['id'])}; the value above is shown once", err=True)


@tokens_cli.command("list")
@click.option("--org", "slug", required=True)
@click.option("--as", "actor", help="A member sees their own tokens; admins and owners see all.")
def list_(slug, actor):
    """List tokens (never their values)."""
    with transaction() as conn:
        org = require_organization(conn, slug)
        only_user = None
        if actor:
            member = require_member(conn, org, actor)
            only_user = None if member["role"] in ("admin", "owner") else member["user_id"]
        rows = tokens.list_tokens(conn, org["id"], only_user)
    for row in rows:
        row["id"] = format_id(PREFIXES["token"], row["id"])
    print_table(rows, ["id", "name", "user_email", "state", "created_at", "expires_at", "revoked_at"])


@tokens_cli.command("revoke")
@click.argument("token_id")
@click.option("--as", "actor", help="Members revoke their own tokens; admins and owners any token.")
def revoke(token_id, actor):
    """Revoke a token (tok_<n>); it stops working at once."""
    parsed_id = require_id(token_id, PREFIXES["token"], "token")
    with transaction() as conn:
        token = tokens.get_token(conn, parsed_id)
        if token is None:
            raise click.ClickException(f"no token {token_id}")
        if actor:
            org_id = token["organization_id"]
            org = {"id": org_id, "slug": format_id(PREFIXES["organization"], org_id)}
            member = require_member(conn, org, actor)
            if member["role"] == "member" and member["user_id"] != token["user_id"]:
                raise click.ClickException(f"{actor} is a member and can revoke only their own tokens")
        tokens.revoke_token(conn, parsed_id)
    click.echo(f"revoked {token_id}")
