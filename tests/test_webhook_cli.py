"""`flask webhooks ...`: the settings commands, their rules, test events and resends."""
import re

import pytest
import standardwebhooks

from api import versions
from cli import webhooks as webhook_commands
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
                    ["remove", endpoint_id], ["test", endpoint_id], ["attempts", endpoint_id]):
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
    assert lines[0].split()[:6] == ["attempted_at", "event", "type", "attempt", "reason", "status"]
    assert len(lines) == 3 and " resend " in lines[1] and " scheduled " in lines[2]


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
    assert cli("enable", endpoint_id) == (0, "whe_1 enabled\n")
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'arrived' WHERE id = %s", (sid,))
    run_pass(settings)
    assert [b["data"]["previous_attributes"] for b in event_bodies(receiver)] == [{"status": "in_transit"}]
