"""Behind a real PgBouncer, in session and in transaction mode, declared or not: the same answers as direct.

Every route of the API and MCP, fuzzy search included, concurrent requests sharing few server
connections (where prepared statements and session settings would break), nothing left on the
server connections other clients then use, the delivery script and the CLI; a setup error named as such.
"""
import json
import logging
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

import psycopg2
import pytest

from tests.support import ROOT
from tests.support.apps import NO_RATE_LIMITS, make_app
from tests.support.factories import auth, make_org, make_shipment
from tests.support.pgbouncer import PgBouncer
from tests.support.processes import wait_for
from tests.support.webhooks import add_endpoint, pass_process

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
# PgBouncer's pool mode, and what DATABASE_POOLER says of it: "undeclared" is a transaction pooler's URL
# pasted as is (a managed database's), which the service finds out by itself.
MODES = {"session": ("session", "session"), "transaction": ("transaction", "transaction"),
         "undeclared": ("transaction", None)}


@pytest.fixture(scope="module", params=list(MODES))
def bouncer(request, server_url):
    """A PgBouncer in front of the test server, in each mode; `declared` is the DATABASE_POOLER setting."""
    mode, declared = MODES[request.param]
    started = PgBouncer(server_url, mode).start()
    started.declared = declared
    yield started
    started.close()


def pooled_app(bouncer, app, **config):
    """An app like `app` whose DATABASE_URL goes through `bouncer`."""
    return make_app(bouncer.url(app.config["DATABASE_URL"]), DATABASE_POOLER=bouncer.declared,
                    STORAGE_DIR=app.config["STORAGE_DIR"], RATE_LIMITS=NO_RATE_LIMITS, **config)


def pooler_env(bouncer, url):
    """The environment of a child process whose DATABASE_URL is `url`, with the DATABASE_POOLER of `bouncer`."""
    return {**os.environ, "DATABASE_URL": url, "SHIPTRACK_DATABASE_POOLER": json.dumps(bouncer.declared)}


def typo(name):
    """`name` with two letters of its first long word swapped, as someone typing fast would."""
    word = max(name.split(), key=len)
    at = len(word) // 2
    return name.replace(word, word[:at - 1] + word[at] + word[at - 1] + word[at + 1:], 1)


def paths_of(client, headers):
    """A GET of every route of the API, with ids from the demo data."""
    shipments = client.get("/shipments?limit=3", headers=headers).json["data"]
    first = shipments[0]["id"]
    documents = [d for s in shipments for d in client.get(f"/shipments/{s['id']}/documents", headers=headers)
                 .json["data"]]
    event = client.get("/events?limit=1", headers=headers).json["data"][0]["id"]
    name = next(s["parties"]["consignee"] for s in shipments if s["parties"]["consignee"])
    paths = ["/organization", "/shipments?limit=20", "/shipments?limit=5&status=in_transit", f"/shipments/{first}",
             f"/shipments/{first}.json", f"/shipments/{first}/timeline", f"/shipments/{first}/free_time",
             "/free_time/at_risk", f"/shipments/{first}/documents", f"/shipments/{first}/packing_lists",
             "/alerts", "/checks", "/events?limit=5", f"/events/{event}", "/changes", "/openapi.json", "/docs",
             "/docs/docs-init.js", "/no-such-route"]
    if documents:
        document = documents[0]["id"]
        paths += [f"/documents/{document}", f"/documents/{document}/data", f"/documents/{document}/file"]
    paths.append(f"/shipments?limit=100&q={quote(typo(name))}")
    # A word similarity of 0.57 to the demo's "Acme Fresh Imports B.V.": found at the service's threshold
    # (0.5), not at pg_trgm's default (0.6), so only a transaction that has the setting finds it.
    paths.append(f"/shipments?limit=100&q={quote('Fresh Imoprts')}")
    return paths


def answers(client, headers, paths):
    """(status, ETag, body) of each path, and of MCP's tools/list and one tools/call."""
    found = {path: _answer(client.get(path, headers=headers)) for path in paths}
    for message in ({"method": "tools/list"},
                    {"method": "tools/call", "params": {"name": "list_shipments", "arguments": {"limit": 5}}}):
        response = client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, **message}, headers={**headers, **MCP_HEADERS})
        found[message["method"]] = _answer(response)
    return found


def _answer(response):
    with response:  # a document's file is streamed from an open file
        return response.status_code, response.headers.get("ETag"), response.get_data()


def test_every_route_and_mcp_answer_as_direct(bouncer, demo_database):
    direct_client = demo_database.app.test_client()
    headers = demo_database.headers
    paths = paths_of(direct_client, headers)
    assert any("q=" in path for path in paths), "fuzzy search is part of the sweep"
    direct = answers(direct_client, headers, paths)
    assert all(status < 500 for status, _etag, _body in direct.values())
    for fuzzy in [path for path in paths if "q=" in path]:
        assert b'"data":[]' not in direct[fuzzy][2], f"the misspelled name is found directly: {fuzzy}"
    pooled = answers(pooled_app(bouncer, demo_database.app).test_client(), headers, paths)
    assert pooled == direct
    if bouncer.mode == "transaction":
        assert bouncer.server_sessions(demo_database.url) == [[]] * bouncer.pool_size


def test_concurrent_requests_share_few_server_connections(bouncer, demo_database):
    """Eight clients over two server connections (transaction mode): prepared statements and settings hold."""
    app = pooled_app(bouncer, demo_database.app)
    headers = demo_database.headers
    first = app.test_client().get("/shipments?limit=1", headers=headers).json["data"][0]["id"]
    paths = ["/shipments?limit=10", f"/shipments/{first}/packing_lists", "/free_time/at_risk", "/organization"]

    def one(number):
        return app.test_client().get(paths[number % len(paths)], headers=headers).status_code
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(one, range(160)))
    assert statuses == [200] * 160
    if bouncer.mode == "transaction":
        assert bouncer.server_sessions(demo_database.url) == [[]] * bouncer.pool_size


def test_the_cli_works_through_it(bouncer, database_url):
    def command(*words):
        return subprocess.run([sys.executable, "-m", "flask", "--app", "app", "db", *words], cwd=ROOT,
                              env=pooler_env(bouncer, bouncer.url(database_url)),
                              capture_output=True, text=True, timeout=60)
    upgrade = command("upgrade")
    assert upgrade.returncode == 0, upgrade.stderr
    result = command("status")
    assert (result.returncode, result.stdout.startswith("schema version ")) == (0, True), result.stderr
    if bouncer.mode == "transaction":
        assert bouncer.server_sessions(database_url) == [[]] * bouncer.pool_size


def test_a_pass_delivers_through_it(bouncer, conn, database_url, receiver, ca_bundle):
    org = make_org(conn, "acme")
    add_endpoint(conn, org, receiver.url("/ok", host="127.0.0.1"))
    for _ in range(3):
        make_shipment(conn, org)
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'in_transit'")  # three shipment.status_changed events
    with pass_process(bouncer.url(database_url), ca_bundle, "--seconds", "3",
                      DATABASE_POOLER=bouncer.declared) as process:
        output = process.communicate(timeout=60)[0].decode()
    assert process.returncode == 0, output
    with conn.cursor() as cur:
        cur.execute("SELECT state, count(*) FROM webhook_deliveries GROUP BY 1")
        assert cur.fetchall() == [{"state": "succeeded", "count": 3}], output
    assert len(receiver.requests) == 3
    if bouncer.mode == "transaction":
        assert bouncer.server_sessions(database_url) == [[]] * bouncer.pool_size


def listening(conn):
    """How many sessions of the delivery script LISTEN on the server, past any pooler."""
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) AS n FROM pg_stat_activity WHERE query = 'LISTEN webhook_events' "
                    "AND datname = current_database()")
        return cur.fetchone()["n"]


@pytest.mark.parametrize("listen_directly", [False, True])
def test_watch_through_it_says_when_it_cannot_listen(bouncer, conn, database_url, receiver, ca_bundle,
                                                      listen_directly):
    org = make_org(conn, "acme")
    sid = make_shipment(conn, org)
    add_endpoint(conn, org, receiver.url("/ok", host="127.0.0.1"))
    extra = {"DATABASE_LISTEN_URL": database_url} if listen_directly else {}
    deaf = bouncer.mode == "transaction" and not listen_directly
    with pass_process(bouncer.url(database_url), ca_bundle, "--watch", DATABASE_POOLER=bouncer.declared,
                      **extra) as process:
        try:
            assert wait_for(lambda: listening(conn) == (0 if deaf else 1), 15)
            with conn.cursor() as cur:
                cur.execute("UPDATE shipments SET status = 'in_transit' WHERE id = %s", (sid,))
            assert wait_for(lambda: len(receiver.requests) == 1, 20), "the event arrives either way"
            assert listening(conn) == (0 if deaf else 1)
        finally:
            process.send_signal(signal.SIGTERM)
            output = process.communicate(timeout=30)[0].decode()
    assert process.returncode == 0, output
    warnings = [line for line in output.splitlines() if "LISTEN cannot work through a transaction pooler" in line]
    assert len(warnings) == (1 if deaf else 0), output
    if bouncer.mode == "transaction":
        assert bouncer.server_sessions(database_url) == [[]] * bouncer.pool_size


def test_a_setup_error_is_named_not_an_outage(bouncer, database_url, caplog):
    """What PgBouncer refuses (`options`, an unknown database or user) is logged as a setup error."""
    with pytest.raises(psycopg2.OperationalError, match="unsupported startup parameter: options"):
        psycopg2.connect(bouncer.url(database_url), options="-c timezone=UTC")
    for url in (bouncer.url(database_url, database="no_such_database"), bouncer.url(database_url, user="nobody")):
        app = make_app(url, DATABASE_POOLER=bouncer.declared)
        app.config["PROPAGATE_EXCEPTIONS"] = False
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            response = app.test_client().get("/organization", headers=auth("sv_" + "a" * 40))
        assert response.status_code == 503
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert len(errors) == 1 and errors[0].startswith("database setup error"), caplog.text


@pytest.mark.parametrize("command, words", [
    (["-m", "delivery", "--seconds", "1"], "database setup error, exiting"),
    (["-m", "flask", "--app", "app", "db", "status"], "Error: cannot connect to the database: a setup error"),
])
def test_the_delivery_script_and_the_cli_name_a_setup_error_in_one_line(bouncer, database_url, command, words):
    # A database name of its own: PgBouncer keeps clients of a database whose login just failed waiting
    # (server_login_retry), which the connect timeout then ends.
    unknown = f"no_such_database_{command[1]}"
    result = subprocess.run([sys.executable, *command], cwd=ROOT, capture_output=True, text=True, timeout=60,
                            env=pooler_env(bouncer, bouncer.url(database_url, database=unknown)))
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and unknown in lines[0], result.stderr
