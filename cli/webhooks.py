"""`flask webhooks ...`: webhook endpoints as the application settings manage them (admins and owners)."""
import uuid

import click
from flask import current_app
from flask.cli import AppGroup

from cli.common import (cut, format_when, parse_since, print_table, require_id, require_member, require_organization,
                        transaction)
from cli.secrets import secret_keys
from delivery import recording, signing, ssrf
from delivery.sender import send_delivery, utcnow
from delivery.outbox import render_pending
from delivery.settings import Settings
from models import events, organizations, webhook_deliveries, webhooks
from rendering.ids import PREFIXES, format_id

webhooks_cli = AppGroup("webhooks", help="Webhook endpoints: add, list, secrets, enable/disable, test, resend, "
                                         "recover; events that could not be rendered.")

MANAGERS = ("admin", "owner")
EVENT, ENDPOINT = PREFIXES["webhook_event"], PREFIXES["webhook_endpoint"]
actor_option = click.option("--as", "actor", help="E-mail of the admin or owner doing this.")
# No line of `list` and `attempts` is wider (a URL longer than that excepted: it is shown whole, to be copied).
LIST_WIDTH = 120


def _settings():
    return Settings.from_config(current_app.config)


def _check_url(url):
    settings = _settings()
    try:
        allowed = ssrf.allowed_networks(settings.allowed_networks)
    except ValueError as error:  # a misconfigured allow-list is the operator's error, not the URL's
        raise click.ClickException(str(error)) from None
    try:
        ssrf.check_url(url, settings.service_domain, allowed)
    except ssrf.RefusedUrl as refusal:
        raise click.BadParameter(str(refusal), param_hint="--url") from None


def _event_types(value):
    types = list(dict.fromkeys(t.strip() for t in value.split(",") if t.strip()))
    if not types:
        raise click.BadParameter("choose at least one event type", param_hint="--events")
    unknown = [t for t in types if t not in webhooks.EVENT_TYPES]
    if unknown:
        raise click.BadParameter(f"unknown event type {unknown[0]!r}; choose from {', '.join(webhooks.EVENT_TYPES)} "
                                 f"(webhook.test is sent only by `webhooks test`)", param_hint="--events")
    return types


def _endpoint(conn, value, actor):
    """The endpoint named `value` (whe_<n>), after checking the actor manages its organization."""
    endpoint = webhooks.get_endpoint(conn, require_id(value, ENDPOINT, "webhook endpoint"))
    if endpoint is None:
        raise click.ClickException(f"no webhook endpoint {value}")
    if actor:
        require_member(conn, organizations.get_organization(conn, endpoint["organization_id"]), actor, MANAGERS)
    return endpoint


@webhooks_cli.command("add")
@click.option("--org", "slug", required=True)
@click.option("--url", required=True, help="HTTPS URL of the receiver; must be publicly reachable.")
@click.option("--events", "types", required=True, help="Comma-separated: " + ", ".join(webhooks.EVENT_TYPES))
@click.option("--description", help="Free text shown in the list.")
@actor_option
def add(slug, url, types, description, actor):
    """Add an endpoint; prints its id and signing secret."""
    chosen = _event_types(types)
    _check_url(url)
    secret = signing.new_secret()
    with transaction() as conn, secret_keys(conn) as keys:
        org = require_organization(conn, slug)
        if actor:
            require_member(conn, org, actor, MANAGERS)
        try:
            row = webhooks.create_endpoint(conn, org["id"], url, chosen, description, keys.seal(secret))
        except webhooks.EndpointLimitReached as error:
            raise click.ClickException(str(error)) from None
    click.echo(f"{format_id(ENDPOINT, row['id'])} {secret}")


@webhooks_cli.command("list")
@click.option("--org", "slug", required=True)
@actor_option
def list_(slug, actor):
    """List an organization's endpoints (never their secrets)."""
    with transaction() as conn:
        org = require_organization(conn, slug)
        if actor:
            require_member(conn, org, actor, MANAGERS)
        rows = webhooks.list_endpoints(conn, org["id"])
    for row in rows:
        row["id"] = format_id(ENDPOINT, row["id"])
        row["state"] = "enabled" if row["enabled"] else "disabled"
        # The 3-day rule disables at the first failure after this time, if failures keep coming.
        row["disables_at"] = format_when(recording.disables_at(row["failing_since"]) if row["enabled"] else None)
        row["failing_since"] = format_when(row["failing_since"])
        row["last_success"] = format_when(row["last_success"])
    print_table(rows, ["id", "state", "waiting", "failing_since", "last_success", "disables_at"], _endpoint_lines)


def _endpoint_lines(row):
    """Under an endpoint of the list: its URL (whole, to be copied), events, description, why it was disabled."""
    return [row["url"], "events " + ",".join(row["event_types"]),
            *(cut(f"{label} {' '.join(row[key].split())}", LIST_WIDTH - 2) for label, key in
              (("description", "description"), ("disabled:", "disabled_reason")) if row[key])]


@webhooks_cli.command("reveal-secret")
@click.argument("endpoint_id")
@actor_option
def reveal_secret(endpoint_id, actor):
    """Print an endpoint's signing secret."""
    with transaction() as conn, secret_keys(conn) as keys:
        click.echo(keys.open(_endpoint(conn, endpoint_id, actor)["secret"]))


@webhooks_cli.command("roll-secret")
@click.argument("endpoint_id")
@actor_option
def roll_secret(endpoint_id, actor):
    """Replace the signing secret (the old one stops working at once); prints the new one."""
    secret = signing.new_secret()
    with transaction() as conn, secret_keys(conn) as keys:
        webhooks.set_secret(conn, _endpoint(conn, endpoint_id, actor)["id"], keys.seal(secret))
    click.echo(secret)


@webhooks_cli.command("enable")
@click.argument("endpoint_id")
@actor_option
def enable(endpoint_id, actor):
    """Enable an endpoint (after a fix); its failure count starts afresh. Prints how to recover what it missed."""
    with transaction() as conn:
        endpoint = _endpoint(conn, endpoint_id, actor)
        webhooks.enable_endpoint(conn, endpoint["id"])
    click.echo(f"{endpoint_id} enabled")
    if not endpoint["enabled"]:
        click.echo(f"to send what it missed while disabled: "
                   f"flask --app app webhooks recover {endpoint_id} --since {format_when(endpoint['disabled_at'])}")


@webhooks_cli.command("disable")
@click.argument("endpoint_id")
@actor_option
def disable(endpoint_id, actor):
    """Disable an endpoint: it receives nothing, and its waiting deliveries are dropped."""
    with transaction() as conn:
        endpoint = _endpoint(conn, endpoint_id, actor)
        now = utcnow()
        dropped = webhooks.disable_endpoint(conn, endpoint["id"], now, f"disabled by {actor or 'an operator'}",
                                            notified_at=now)
    click.echo(f"{endpoint_id} disabled; {dropped} waiting deliveries dropped")


@webhooks_cli.command("remove")
@click.argument("endpoint_id")
@actor_option
def remove(endpoint_id, actor):
    """Delete an endpoint with its deliveries and attempt log."""
    with transaction() as conn:
        webhooks.remove_endpoint(conn, _endpoint(conn, endpoint_id, actor)["id"])
    click.echo(f"{endpoint_id} removed")


def _send_now(claimed):
    """Send deliveries created already leased to us, record them, and report; False when one failed."""
    settings = _settings()
    sender = settings.make_sender()
    try:
        results = [send_delivery(sender, delivery) for delivery in claimed]
    finally:
        sender.close()
    with transaction() as conn:
        recording.record(conn, results)
    for result in results:
        outcome, delivery = result.outcome, result.delivery
        verdict = ("delivered" if outcome.succeeded else f"failed ({outcome.error})")
        later = "" if outcome.succeeded or delivery.reason == "test" else "; retried on the usual schedule"
        click.echo(f"{format_id(EVENT, delivery.event_id)} -> {format_id(ENDPOINT, delivery.endpoint_id)}: "
                   f"{verdict}, HTTP {outcome.status_code or '-'} in {outcome.duration_ms} ms{later}")
    return all(result.outcome.succeeded for result in results)


@webhooks_cli.command("test")
@click.argument("endpoint_id")
@actor_option
def test(endpoint_id, actor):
    """Send one webhook.test event now (never retried, never counted toward disabling)."""
    lease_until = utcnow() + _settings().lease
    with transaction() as conn, secret_keys(conn) as keys:
        endpoint = _endpoint(conn, endpoint_id, actor)
        event = events.create_test_event(conn, endpoint["organization_id"], endpoint["id"])
        # Rendered through the outbox like any event, in this transaction, so no pass renders it first.
        render_pending(conn, utcnow(), event_ids=[event["id"]])
        claimed = keys.opened(webhook_deliveries.create_claimed(conn, event["id"], endpoint["id"], "test", 1,
                                                                lease_until, str(uuid.uuid4()), utcnow()))
    if not _send_now([claimed]):
        raise click.ClickException("the test event was not delivered")


@webhooks_cli.command("resend")
@click.argument("event_id")
@click.option("--endpoint", "endpoint_id", help="Only this endpoint (whe_<n>); default: every subscribed one.")
@actor_option
def resend(event_id, endpoint_id, actor):
    """Send an event again (same id, fresh timestamp); failures retry on the usual schedule."""
    parsed_id = require_id(event_id, EVENT, "event")
    lease_until = utcnow() + _settings().lease
    with transaction() as conn, secret_keys(conn) as keys:
        event = events.get_event(conn, parsed_id)
        if event is not None and event["state"] == "pending":
            render_pending(conn, utcnow(), event_ids=[parsed_id])
            event = events.get_event(conn, parsed_id)
        if event is None or event["type"] == "webhook.test":
            raise click.ClickException(f"no event {event_id} to resend")
        if actor:
            require_member(conn, organizations.get_organization(conn, event["organization_id"]), actor, MANAGERS)
        if event["state"] == "render_failed":
            raise click.ClickException(f"{event_id} could not be rendered ({event['render_error']}); fix the cause, "
                                       f"then: flask --app app webhooks retry-render {event_id}")
        if event["state"] != "rendered":
            raise click.ClickException(f"{event_id} is about a shipment that can no longer be shown; nothing to send")
        if endpoint_id:
            target = _endpoint(conn, endpoint_id, None)
            if target["organization_id"] != event["organization_id"]:
                raise click.ClickException(f"{endpoint_id} belongs to another organization than {event_id}")
            if not target["enabled"]:
                raise click.ClickException(f"{endpoint_id} is disabled; enable it first")
            targets = [target["id"]]
        else:
            targets = events.subscribed_endpoints(conn, event["organization_id"], event["type"])
        if not targets:
            raise click.ClickException(f"no enabled endpoint receives {event['type']}")
        claimed = [keys.opened(webhook_deliveries.create_claimed(conn, parsed_id, target, "resend",
                                                                 recording.MAX_ATTEMPTS, lease_until,
                                                                 str(uuid.uuid4()), utcnow()))
                   for target in targets]
    if not _send_now(claimed):
        raise click.ClickException("not every endpoint accepted the event")


@webhooks_cli.command("recover")
@click.argument("endpoint_id")
@click.option("--since", "since", required=True, help="ISO 8601 time, e.g. 2026-10-01T08:00:00Z (UTC if no offset).")
@actor_option
def recover(endpoint_id, since, actor):
    """Queue the events since then that the endpoint subscribes to and did not receive (failed, dropped, never made)."""
    now = utcnow()
    start = parse_since(since)
    # Older events are gone or going (30-day retention); asking for more than that is not an error.
    start = max(start, now - recording.RETENTION)
    with transaction() as conn:
        endpoint = _endpoint(conn, endpoint_id, actor)
        if not endpoint["enabled"]:
            raise click.ClickException(f"{endpoint_id} is disabled; enable it first")
        # Events not rendered yet are left to the next pass, which fans them out to it as usual.
        queued = webhook_deliveries.queue_missed(conn, endpoint["id"], start, now)
    click.echo(f"{endpoint_id}: {queued} missed events since {format_when(start)} queued; the next delivery pass sends them")


# The attempt log's columns: 103 characters with the longest values (an 18-digit event id,
# shipment.checks_completed, interrupted); address, error, reply and next attempt go on a line under each.
ATTEMPT_COLUMNS = ["attempted_at", "event", "type", "attempt", "reason", "status", "http", "ms"]


@webhooks_cli.command("attempts")
@click.argument("endpoint_id")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@actor_option
def attempts(endpoint_id, limit, actor):
    """An endpoint's attempt log, newest first; under each attempt: address, error, reply, next attempt."""
    with transaction() as conn:
        rows = webhooks.list_attempts(conn, _endpoint(conn, endpoint_id, actor)["id"], limit)
    shown = [dict(zip(ATTEMPT_COLUMNS, (format_when(row["attempted_at"]), format_id(EVENT, row["event_id"]),
                                        row["type"], row["attempt"], row["reason"], row["state"], row["status_code"],
                                        row["duration_ms"])), row=row) for row in rows]
    print_table(shown, ATTEMPT_COLUMNS, _attempt_lines)


def _attempt_lines(shown):
    """Under an attempt of the log: the address, error, reply and next attempt, on one line."""
    row = shown["row"]
    reply = " ".join((row["response_body"] or "").split())[:60]
    details = "; ".join(part for part in (
        row["address"] and f"to {row['address']}", row["error"], reply and f"replied {reply}",
        row["delivery_state"] == "pending" and row["next_attempt_at"]
        and f"next attempt {format_when(row['next_attempt_at'])}") if part)
    return [cut(details, LIST_WIDTH - 2)] if details else []
