"""`flask orgs ...` and `flask members ...`: organizations and their people."""
import click
from flask.cli import AppGroup

from cli.common import print_table, require_member, require_organization, transaction, with_article
from models import organizations
from rendering import versions
from rendering.ids import PREFIXES, format_id

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


@orgs_cli.command("versions")
@click.option("--org", "slug", help="Mark this organization's pin.")
def list_versions(slug):
    """List the published API versions, oldest first (with --org, the one it is pinned to)."""
    columns, pinned = ["version", "latest"], None
    if slug:
        with transaction() as conn:
            pinned = require_organization(conn, slug)["api_version"]
        columns.append("pinned")
    rows = [{"version": version, "latest": "yes" if version == versions.LATEST else "",
             "pinned": "yes" if version == pinned else ""} for version in versions.PUBLISHED]
    print_table(rows, columns)
    if slug and pinned is None:
        click.echo(f"{slug} has no pin yet: its first request without Service-Version pins it to "
                   f"{versions.LATEST}", err=True)


@orgs_cli.command("pin-version")
@click.option("--org", "slug", required=True)
@click.option("--version", "version", required=True, help="A published version (YYYY-MM-DD), not older than the pin.")
@click.option("--as", "actor", help="E-mail of the admin or owner doing this.")
def pin_version(slug, version, actor):
    """Move the organization's API version pin forward to a published version."""
    if version not in versions.PUBLISHED:
        raise click.BadParameter(f"{version!r} is not a published version; published: "
                                 f"{', '.join(versions.PUBLISHED)}", param_hint="--version")
    with transaction() as conn:
        org = require_organization(conn, slug)
        if actor:
            require_member(conn, org, actor, ("admin", "owner"))
        # Locked, so a concurrent move cannot slip an older pin in after this check.
        current = organizations.lock_pinned_version(conn, org["id"])
        if version < (current or versions.LATEST):
            raise click.ClickException(_backwards(slug, current, version))
        if version != current:
            organizations.move_pinned_version(conn, org["id"], version)
    if version == current:
        click.echo(f"{slug} is already pinned to {version}")
    else:
        click.echo(f"{slug} is pinned to {version} (was {current or 'not pinned'})")


def _backwards(slug, current, version):
    """Why a pin may not move to an older version (SPEC: an admin moves the pin forward)."""
    if current is None:
        # Its first request, and its webhooks already, use the latest: forward starts there.
        where = (f"{slug} has no pin yet, so its requests without Service-Version and its webhooks "
                 f"use the latest version, {versions.LATEST}")
    else:
        where = f"{slug} is pinned to {current}"
    return (f"{where}; a pin only moves forward and {version} is older. A request can still ask for "
            f"{version} with the Service-Version header.")


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
    click.echo(f"{email} is {with_article(role)} of {slug}")


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
