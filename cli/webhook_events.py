"""`flask webhooks render-failures` and `retry-render`: events the serialiser could not render, and rendering them again."""
import click

from cli.common import format_when, print_table, require_id, require_member, require_organization, transaction
from cli.webhooks import EVENT, MANAGERS, actor_option, webhooks_cli
from delivery.sender import utcnow
from delivery.outbox import RENDER_BATCH, render_pending
from models import events, organizations
from rendering.ids import PREFIXES, format_id


@webhooks_cli.command("render-failures")
@click.option("--org", "slug", help="Only this organization's events.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@actor_option
def render_failures(slug, limit, actor):
    """Events the serialiser could not render (never sent until retried), oldest first, with the error."""
    if actor and not slug:
        raise click.UsageError("--as needs --org")
    with transaction() as conn:
        org = require_organization(conn, slug) if slug else None
        if actor:
            require_member(conn, org, actor, MANAGERS)
        rows = events.list_render_failures(conn, org and org["id"], limit)
    for row in rows:
        row["event"] = format_id(EVENT, row["id"])
        row["subject"] = (format_id(PREFIXES["monitoring_alert"], row["alert_id"]) if row["alert_id"]
                          else format_id(PREFIXES["shipment"], row["shipment_id"]) if row["shipment_id"] else None)
        row["created_at"], row["failed_at"] = format_when(row["created_at"]), format_when(row["failed_at"])
    print_table(rows, ["event", "organization", "type", "subject", "created_at", "failed_at", "render_error"])


@webhooks_cli.command("retry-render")
@click.argument("event_ids", nargs=-1)
@click.option("--all", "every", is_flag=True, help="Every event that could not be rendered (with --org: its events).")
@click.option("--org", "slug", help="With --all: only this organization's events.")
@actor_option
def retry_render(event_ids, every, slug, actor):
    """Render failed events again now (after the fix); rendered ones are fanned out and sent by the next pass."""
    if bool(event_ids) == every:
        raise click.UsageError("name events (msg_<n> ...) or give --all")
    if actor and not (slug or event_ids):
        raise click.UsageError("--as needs --org or named events")
    parsed_ids = [require_id(value, EVENT, "event") for value in event_ids] or None
    with transaction() as conn:
        org = require_organization(conn, slug) if slug else None
        if actor and org:
            require_member(conn, org, actor, MANAGERS)
        if parsed_ids and actor:
            for event_id in parsed_ids:
                event = events.get_event(conn, event_id)
                if event is not None:
                    require_member(conn, organizations.get_organization(conn, event["organization_id"]), actor,
                                   MANAGERS)
        retried = events.retry_render_failures(conn, parsed_ids, org and org["id"])
        missing = sorted(set(parsed_ids or ()) - set(retried))
        if missing:
            raise click.ClickException(", ".join(format_id(EVENT, n) for n in missing)
                                       + " did not fail to render; nothing to retry")
        for start in range(0, len(retried), RENDER_BATCH):
            render_pending(conn, utcnow(), RENDER_BATCH, event_ids=retried[start:start + RENDER_BATCH])
        outcomes = {row["id"]: row for row in (events.get_event(conn, event_id) for event_id in retried)}
    failed = 0
    for event_id in retried:
        row = outcomes[event_id]
        if row["state"] == "render_failed":
            failed += 1
            click.echo(f"{format_id(EVENT, event_id)}: still fails: {row['render_error']}")
        elif row["state"] == "skipped":
            click.echo(f"{format_id(EVENT, event_id)}: skipped (its subject can no longer be shown)")
        else:
            click.echo(f"{format_id(EVENT, event_id)}: rendered; the next delivery pass sends it")
    if not retried:
        click.echo("no event failed to render")
    if failed:
        raise click.ClickException(f"{failed} of {len(retried)} events still fail to render")
