"""`flask webhooks ...`: the settings commands, their rules, test events and resends."""
import re
from datetime import datetime, timedelta, timezone

import pytest
import standardwebhooks

from cli import webhooks as webhook_commands
from rendering import versions
from tests.support.factories import make_org, make_shipment
from tests.support.webhooks import event_bodies, run_pass

ALL = "shipment.status_changed,shipment.eta_changed,shipment.checks_completed,alert.created"


@pytest.fixture
def cli(database_url, ca_bundle):
    """Invoke `flask webhooks ...` against the test database; returns (exit code, output)."""
    from app import create_app

    app = create_app({"TESTING": True, "DATABASE_URL": database_url, "SERVICE_DOMAIN": "shiptrack.example",
                      "WEBHOOK_ALLOWED_NETWORKS": ["127.0.0.1/32"], "WEBHOOK_CA_BUNDLE": ca_bundle})
    runner = app.test_cli_runner()

    def invoke(*args):
        result = runner.invoke(args=["webhooks", *args])
        return result.exit_code, result.output
    return invoke


@pytest.fixture
def org(conn):
    return make_org(conn, "acme")


def _add(cli, url, events=ALL, *extra):
    code, output = cli("add", "--org", "acme", "--url", url, "--events", events, *extra)
    assert code == 0, output
    match = re.fullmatch(r"(whe_\d+) (whsec_[A-Za-z0-9+/]+=*)\n", output)
    assert match, output
    return match.group(1), match.group(2)


def test_add_list_reveal_roll_remove(cli, org, receiver):
    endpoint_id, secret = _add(cli, receiver.url("/ok", host="127.0.0.1"), ALL, "--description", "ERP sync",
                               "--as", "admin@acme.example")
    assert endpoint_id == "whe_1"
    code, output = cli("list", "--org", "acme")
    assert code == 0 and "whe_1" in output and "ERP sync" in output and "enabled" in output
    assert secret not in output
    assert cli("reveal-secret", "whe_1") == (0, secret + "\n")
    code, rolled = cli("roll-secret", "whe_1", "--as", "owner@acme.example")
    assert code == 0 and rolled.strip() != secret and rolled.startswith("whsec_")
    assert cli("reveal-secret", "whe_1") == (0, rolled)
    assert cli("remove", "whe_1") == (0, "whe_1 removed\n")
    assert "whe_1" not in cli("list", "--org", "acme")[1]


def test_only_admins_and_owners(cli, org, receiver):
    url = receiver.url("/ok", host="127.0.0.1")
    code, output = cli("add", "--org", "acme", "--url", url, "--events", ALL, "--as", "member@acme.example")
    assert code == 1 and "member@acme.example is a member of acme" in output
    endpoint_id, _secret = _add(cli, url)
    for command in (["reveal-secret", endpoint_id], ["roll-secret", endpoint_id], ["disable", endpoint_id],
                    ["remove", endpoint_id], ["test", endpoint_id], ["attempts", endpoint_id],
                    ["recover", endpoint_id, "--since", "2026-10-01T00:00:00Z"]):
        code, output = cli(*command, "--as", "member@acme.example")
        assert code == 1 and "needs one of: admin, owner" in output, command
    code, output = cli("list", "--org", "acme", "--as", "stranger@elsewhere.example")
    assert code == 1 and "is not a member" in output


def test_at_most_five_endpoints(cli, org, receiver):
    for _ in range(5):
        _add(cli, receiver.url("/ok", host="127.0.0.1"))
    code, output = cli("add", "--org", "acme", "--url", receiver.url("/ok", host="127.0.0.1"), "--events", ALL)
    assert code == 1 and "at most 5 webhook endpoints" in output


@pytest.mark.parametrize("events, message", [
    ("", "choose at least one event type"),
    (" , ", "choose at least one event type"),
    ("shipment.created", "unknown event type 'shipment.created'"),
    ("webhook.test", "webhook.test is sent only by `webhooks test`"),
])
def test_event_types_rules(cli, org, events, message):
    code, output = cli("add", "--org", "acme", "--url", "https://127.0.0.1/", "--events", events)
    assert code == 2 and message in output


@pytest.mark.parametrize("url, message", [
    ("http://127.0.0.1/", "only https:// URLs are allowed"),
    ("https://10.0.0.1/", "10.0.0.1, a private address"),
    ("https://169.254.169.254/latest", "a link-local address"),
    ("https://[::1]/", "a loopback address"),
    ("https://127.0.0.2/", "127.0.0.2, a loopback address"),
    ("https://hooks.shiptrack.example/", "the service's own domain"),
])
def test_url_rules_on_save(cli, org, url, message):
    code, output = cli("add", "--org", "acme", "--url", url, "--events", ALL)
    assert code == 2 and message in output.replace("\n", " ").replace("  ", " ")


PORT_RANGE = "a port is 1 to 65535 (leave it out for 443)"


@pytest.mark.parametrize("port, message", [
    ("0", f"port 0 is out of range; {PORT_RANGE}"),
    ("65536", f"port 65536 is out of range; {PORT_RANGE}"),
    ("123456", f"port 123456 is out of range; {PORT_RANGE}"),
    ("-1", f"port '-1' is not a number; {PORT_RANGE}"),
    ("abc", f"port 'abc' is not a number; {PORT_RANGE}"),
])
def test_port_must_be_1_to_65535(cli, org, conn, port, message):
    code, output = cli("add", "--org", "acme", "--url", f"https://127.0.0.1:{port}/ok", "--events", ALL)
    assert code == 2
    assert output.endswith(f"Error: Invalid value for --url: {message}\n")
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) AS n FROM webhook_endpoints")
        assert cur.fetchone()["n"] == 0


@pytest.mark.parametrize("port", ["1", "8443", "65535"])
def test_ports_in_range_are_kept(cli, org, conn, port):
    _add(cli, f"https://127.0.0.1:{port}/ok")
    with conn.cursor() as cur:
        cur.execute("SELECT url FROM webhook_endpoints")
        assert cur.fetchone()["url"] == f"https://127.0.0.1:{port}/ok"


def test_unspecified_address_wording(cli, org):
    code, output = cli("add", "--org", "acme", "--url", "https://0.0.0.0/", "--events", ALL)
    assert code == 2
    assert output.endswith("Error: Invalid value for --url: 0.0.0.0, an unspecified address: webhooks go only to "
                           "public addresses (test and demo receivers can be allowed with "
                           "SHIPTRACK_WEBHOOK_ALLOWED_NETWORKS)\n")


def test_test_event_sent_once_signed_and_not_counted(cli, org, conn, receiver):
    endpoint_id, secret = _add(cli, receiver.url("/ok", host="127.0.0.1"))
    code, output = cli("test", endpoint_id)
    assert code == 0 and output.startswith("msg_1 -> whe_1: delivered, HTTP 200 in ")
    (request,) = receiver.requests
    body = standardwebhooks.Webhook(secret).verify(request["body"], request["headers"])
    assert body["type"] == "webhook.test"
    assert body["data"] == {"object": {"object": "webhook_test", "endpoint_id": "whe_1",
                                       "message": "Test event sent from the webhook settings."},
                            "previous_attributes": None}
    receiver.force_status = 500
    code, output = cli("test", endpoint_id)
    assert code == 1 and "failed (HTTP 500)" in output and "not delivered" in output
    with conn.cursor() as cur:
        cur.execute("SELECT failing_since FROM webhook_endpoints")
        assert cur.fetchone()["failing_since"] is None
        cur.execute("SELECT state, max_attempts, next_attempt_at FROM webhook_deliveries ORDER BY id")
        assert cur.fetchall()[-1] == {"state": "failed", "max_attempts": 1, "next_attempt_at": None}


def test_a_certificate_of_an_unknown_ca_names_the_setting(database_url, org, receiver):
    """A receiver whose CA is not trusted: the failure says which setting trusts it, as a refused address does."""
    from app import create_app

    app = create_app({"TESTING": True, "DATABASE_URL": database_url, "WEBHOOK_ALLOWED_NETWORKS": ["127.0.0.1/32"]})
    runner = app.test_cli_runner()
    added = runner.invoke(args=["webhooks", "add", "--org", "acme", "--url", receiver.url("/ok", host="127.0.0.1"),
                                "--events", ALL])
    result = runner.invoke(args=["webhooks", "test", added.output.split()[0]])
    failed = re.fullmatch(r"msg_1 -> whe_1: failed \(TLS error: \[SSL: CERTIFICATE_VERIFY_FAILED\] certificate verify "
                          r"failed: (.+) \(_ssl\.c:\d+\) \(a receiver's own CA is trusted with "
                          r"SHIPTRACK_WEBHOOK_CA_BUNDLE\)\), HTTP - in \d+ ms\n"
                          r"Error: the test event was not delivered\n",
                          result.output)
    assert result.exit_code == 1 and failed, result.output
    assert receiver.requests == []


def test_test_event_rendered_through_the_outbox(cli, org, conn, receiver, monkeypatch):
    """`webhooks test` renders like every event (delivery.outbox.render_pending) and sends the stored bytes."""
    calls = []

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return render_pending(*args, **kwargs)

    render_pending = webhook_commands.render_pending
    monkeypatch.setattr(webhook_commands, "render_pending", spy)
    endpoint_id, _secret = _add(cli, receiver.url("/ok", host="127.0.0.1"))
    assert cli("test", endpoint_id)[0] == 0
    assert calls == [{"event_ids": [1]}]
    (request,) = receiver.requests
    with conn.cursor() as cur:
        cur.execute("SELECT state, body, api_version FROM events")
        assert cur.fetchall() == [{"state": "rendered", "body": request["body"].decode(),
                                   "api_version": versions.LATEST}]


def test_rolled_secret_signs_at_once(cli, org, conn, receiver):
    endpoint_id, old = _add(cli, receiver.url("/ok", host="127.0.0.1"))
    new = cli("roll-secret", endpoint_id)[1].strip()
    cli("test", endpoint_id)
    (request,) = receiver.requests
    standardwebhooks.Webhook(new).verify(request["body"], request["headers"])
    with pytest.raises(standardwebhooks.webhooks.WebhookVerificationError):
        standardwebhooks.Webhook(old).verify(request["body"], request["headers"])


def test_resend_same_id_fresh_timestamp(cli, org, conn, receiver, settings):
    first, _ = _add(cli, receiver.url("/ok", host="127.0.0.1"))
    second, _ = _add(cli, receiver.url("/ok?b", host="127.0.0.1"), "alert.created")
    sid = make_shipment(conn, org)
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'in_transit' WHERE id = %s", (sid,))
    run_pass(settings)
    code, output = cli("resend", "msg_1")
    assert code == 0 and output.startswith("msg_1 -> whe_1: delivered")
    code, output = cli("resend", "msg_1", "--endpoint", second)
    assert code == 0 and output.startswith("msg_1 -> whe_2: delivered")
    assert [r["headers"]["webhook-id"] for r in receiver.requests] == ["msg_1"] * 3
    assert len({r["body"] for r in receiver.requests}) == 1
    assert cli("resend", "msg_9")[0] == 1
    code, output = cli("attempts", first)
    lines = output.splitlines()
    assert lines[0].split() == ["attempted_at", "event", "type", "attempt", "reason", "status", "http", "ms"]
    # Each attempt, then where it went and what the receiver replied.
    assert len(lines) == 5 and " resend " in lines[1] and " scheduled " in lines[3]
    assert lines[2] == lines[4] == '  to 127.0.0.1; replied {"received":true}'


def test_attempts_fit_120_columns(cli, org, conn, receiver, settings):
    """The widest values there are: an 18-digit event id, the longest type and state, an error and a long reply."""
    endpoint_id, _ = _add(cli, receiver.url("/status/500", host="127.0.0.1"), "shipment.checks_completed")
    sid = make_shipment(conn, org)
    with conn.cursor() as cur:
        cur.execute("SELECT setval(pg_get_serial_sequence('events', 'id'), 999999999999999990)")
        cur.execute("INSERT INTO check_runs (organization_id, shipment_id, started_at, finished_at) "
                    "VALUES (%s, %s, now(), now())", (org, sid))
    run_pass(settings)
    with conn.cursor() as cur:
        cur.execute("UPDATE webhook_attempts SET state = 'interrupted', response_body = repeat('x', 2000), "
                    "error = 'the receiver took longer than the 15 s a delivery may take in all, then ' || "
                    "repeat('y', 200)")
    code, output = cli("attempts", endpoint_id)
    lines = output.splitlines()
    assert code == 0 and len(lines) == 3, output
    assert lines[1].split() == [lines[1].split()[0], "msg_999999999999999991", "shipment.checks_completed", "1",
                                "scheduled", "interrupted", "500", lines[1].split()[-1]]
    assert lines[2].startswith("  to 127.0.0.1; the receiver took longer") and lines[2].endswith("yyy...")
    assert max(len(line) for line in lines) == 120, output


def test_disable_drops_waiting_and_enable_restores(cli, org, conn, receiver, settings):
    endpoint_id, _ = _add(cli, receiver.url("/ok", host="127.0.0.1"))
    sid = make_shipment(conn, org)
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'in_transit' WHERE id = %s", (sid,))
    code, output = cli("disable", endpoint_id, "--as", "owner@acme.example")
    assert (code, output) == (0, "whe_1 disabled; 0 waiting deliveries dropped\n")
    run_pass(settings)
    assert receiver.requests == []
    assert "disabled" in cli("list", "--org", "acme")[1]
    with conn.cursor() as cur:
        cur.execute("SELECT disabled_at FROM webhook_endpoints WHERE id = 1")
        disabled_at = cur.fetchone()["disabled_at"]
    assert cli("enable", endpoint_id) == (0, "whe_1 enabled\nto send what it missed while disabled: flask --app app "
                                             f"webhooks recover whe_1 --since {disabled_at:%Y-%m-%dT%H:%M:%SZ}\n")
    assert cli("enable", endpoint_id) == (0, "whe_1 enabled\n"), "no hint for an endpoint that was enabled"
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'arrived' WHERE id = %s", (sid,))
    run_pass(settings)
    assert [b["data"]["previous_attributes"] for b in event_bodies(receiver)] == [{"status": "in_transit"}]


def _z(value):
    return f"{value:%Y-%m-%dT%H:%M:%SZ}"


def test_list_shows_health(cli, org, conn, receiver, settings):
    _add(cli, receiver.url("/ok", host="127.0.0.1"), "shipment.status_changed", "--description", "ERP")
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'in_transit' WHERE id = %s", (make_shipment(conn, org),))
    run_pass(settings)
    with conn.cursor() as cur:
        cur.execute("UPDATE webhook_attempts SET attempted_at = '2026-09-30T07:00:00Z'")
        cur.execute("UPDATE webhook_endpoints SET failing_since = '2026-10-01T08:00:00Z', "
                    "last_failure_at = '2026-10-01T09:00:00Z'")
    code, output = cli("list", "--org", "acme")
    assert code == 0 and output.splitlines() == [
        "id     state    waiting  failing_since         last_success          disables_at",
        "whe_1  enabled  0        2026-10-01T08:00:00Z  2026-09-30T07:00:00Z  2026-10-04T08:00:00Z",
        f"  {receiver.url('/ok', host='127.0.0.1')}", "  events shipment.status_changed", "  description ERP"]
    cli("disable", "whe_1")
    assert cli("list", "--org", "acme")[1].splitlines()[1:] == [
        "whe_1  disabled  0        2026-10-01T08:00:00Z  2026-09-30T07:00:00Z",
        f"  {receiver.url('/ok', host='127.0.0.1')}", "  events shipment.status_changed", "  description ERP",
        "  disabled: disabled by an operator"], "no disables_at when disabled"


def test_list_fits_120_columns(cli, org, conn, receiver):
    """The widest values there are: an 18-digit id, every event type, a long description and reason."""
    with conn.cursor() as cur:
        cur.execute("SELECT setval(pg_get_serial_sequence('webhook_endpoints', 'id'), 999999999999999990)")
    endpoint_id, _ = _add(cli, receiver.url("/ok", host="127.0.0.1"), ALL, "--description", "ERP sync " * 40)
    with conn.cursor() as cur:
        cur.execute("UPDATE webhook_endpoints SET failing_since = now(), enabled = false, disabled_at = now(), "
                    "disabled_reason = repeat('failing for more than 3 days ', 10)")
    code, output = cli("list", "--org", "acme")
    lines = output.splitlines()
    assert code == 0 and lines[1].split()[:3] == [endpoint_id, "disabled", "0"], output
    assert lines[3] == f"  events {ALL}" and lines[4].endswith("ERP ...") and lines[5].endswith("for more t...")
    assert max(len(line) for line in lines) == 120 and not any(line.endswith(" ") for line in lines), output


def test_recover_queues_what_was_missed_once(cli, org, conn, receiver, settings):
    endpoint_id, _ = _add(cli, receiver.url("/ok", host="127.0.0.1"), "shipment.status_changed")
    sid = make_shipment(conn, org)

    def change(sql):
        with conn.cursor() as cur:
            cur.execute(f"UPDATE shipments SET {sql} WHERE id = %s", (sid,))
        run_pass(settings)

    change("status = 'in_transit'")                     # msg_1: received
    receiver.force_status = 500
    change("status = 'arrived'")                        # msg_2: abandoned after its attempts
    with conn.cursor() as cur:
        cur.execute("UPDATE webhook_deliveries SET state = 'failed', next_attempt_at = NULL WHERE event_id = 2")
    change("status = 'in_warehouse'")                   # msg_3: waiting, then dropped by disabling
    assert cli("disable", endpoint_id) == (0, "whe_1 disabled; 1 waiting deliveries dropped\n")
    change("status = 'validated'")                      # msg_4: never fanned out to a disabled endpoint
    change("eta = '2030-01-01T00:00:00Z'")              # msg_5: a type it does not subscribe to
    assert cli("recover", endpoint_id, "--since", "2026-10-01T00:00:00Z") == (
        1, "Error: whe_1 is disabled; enable it first\n")
    assert cli("enable", endpoint_id)[0] == 0
    receiver.force_status, before = None, len(receiver.requests)

    base = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(days=2)
    with conn.cursor() as cur:
        cur.execute("UPDATE webhook_endpoints SET created_at = %s", (base,))
        cur.execute("UPDATE events SET created_at = %s + id * interval '1 hour'", (base,))
    since = base + timedelta(hours=3, minutes=30)
    assert cli("recover", endpoint_id, "--since", _z(since)) == (
        0, f"whe_1: 1 missed events since {_z(since)} queued; the next delivery pass sends them\n")
    since = base + timedelta(hours=1, minutes=30)
    assert cli("recover", endpoint_id, "--since", _z(since), "--as", "admin@acme.example") == (
        0, f"whe_1: 2 missed events since {_z(since)} queued; the next delivery pass sends them\n")
    assert cli("recover", endpoint_id, "--since", _z(since))[1].startswith("whe_1: 0 missed events"), \
        "an event already waiting is not queued twice"
    run_pass(settings)
    delivered = receiver.requests[before:]
    assert sorted(r["headers"]["webhook-id"] for r in delivered) == ["msg_2", "msg_3", "msg_4"]
    assert [b["data"]["previous_attributes"] for b in sorted(event_bodies(receiver)[before:], key=lambda b: b["id"])] \
        == [{"status": "in_transit"}, {"status": "arrived"}, {"status": "in_warehouse"}]
    code, output = cli("recover", endpoint_id, "--since", "2000-01-01T00:00:00Z")
    oldest = _z(datetime.now(timezone.utc) - timedelta(days=30))[:10]
    assert code == 0 and output.startswith(f"whe_1: 0 missed events since {oldest}"), "received ones are not sent"
    assert cli("recover", endpoint_id, "--since", "yesterday")[0] == 2
