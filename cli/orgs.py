"""`flask orgs ...` and `flask members ...`: organizations and their people."""
import click
from flask.cli import AppGroup

from api.ids import PREFIXES, format_id
from cli.common import print_table, require_member, require_organization, transaction
from models import organizations

orgs_cli = AppGroup("orgs", help="Organizations.")
members_cli = AppGroup("members", help="Members of an organization and their roles.")


@orgs_cli.command("create")
@click.option("--name", required=True, help="Display name.")
@click.option("--slug", required=True, help="Slug used in the application (a-z, 0-9, dashes).")
@click.option("--owner", "owner_email", help="E-mail of the first owner.")
def create(name, slug, owner_email):
    """Create an organization (optionally with its owner)."""
    with transaction() as conn:
        if organizations.get_organization_by_slug(conn, slug):
            raise click.ClickException(f"an organization with slug {slug!r} already exists")
        org = organizations.create_organization(conn, name, slug)
        if owner_email:
            user = organizations.ensure_user(conn, owner_email)
            organizations.add_member(conn, org["id"], user["id"], "owner")
    click.echo(f"{format_id(PREFIXES['organization'], org['id'])} {slug}")


@orgs_cli.command("list")
def list_():
    """List organizations."""
    with transaction() as conn:
        rows = organizations.list_organizations(conn)
    for row in rows:
        row["id"] = format_id(PREFIXES["organization"], row["id"])
    print_table(rows, ["id", "slug", "name", "api_version", "created_at"])


@members_cli.command("add")
@click.option("--org", "slug", required=True)
@click.option("--email", required=True)
@click.option("--role", type=click.Choice(organizations.ROLES), default="member", show_default=True)
@click.option("--name", help="The person's name.")
@click.option("--as", "actor", help="E-mail of the admin or owner doing this.")
def add(slug, email, role, name, actor):
    """Add a member (or change a member's role)."""
    with transaction() as conn:
        org = require_organization(conn, slug)
        if actor:
            # Only owners make owners; admins manage members and admins.
            require_member(conn, org, actor, ("owner",) if role == "owner" else ("admin", "owner"))
        user = organizations.ensure_user(conn, email, name)
        organizations.add_member(conn, org["id"], user["id"], role)
    click.echo(f"{email} is a {role} of {slug}")


@members_cli.command("remove")
@click.option("--org", "slug", required=True)
@click.option("--email", required=True)
@click.option("--as", "actor", help="E-mail of the admin or owner doing this.")
def remove(slug, email, actor):
    """Remove a member; their tokens stop working at once."""
    with transaction() as conn:
        org = require_organization(conn, slug)
        if actor:
            require_member(conn, org, actor, ("admin", "owner"))
        member = require_member(conn, org, email)
        organizations.remove_member(conn, org["id"], member["user_id"])
    click.echo(f"{email} removed from {slug}")


@members_cli.command("list")
@click.option("--org", "slug", required=True)
def list_members(slug):
    """List members, removed ones included."""
    with transaction() as conn:
        org = require_organization(conn, slug)
        rows = organizations.list_members(conn, org["id"])
    print_table(rows, ["email", "role", "name", "created_at", "removed_at"])
