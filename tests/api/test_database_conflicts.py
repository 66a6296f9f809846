"""A deadlock in a request's first statement (the token check and count) is retried; past the tries, 503.

The deadlock is PostgreSQL's own: a second connection (an operator's script) holds the request's
address bucket of the rate-limit window, the request's count takes its token bucket and waits for the
address one, then the script asks for the token bucket. The script's own deadlock_timeout is long, so the
request's statement is the one PostgreSQL ends (40P01).
"""
import threading

import psycopg2
import pytest

from models import db
from tests.support.apps import make_app
from tests.support.factories import auth, make_org, make_token
from tests.support.processes import wait_for
from tests.support.windows import within_one_window

WINDOW_SECONDS = 300
CONFLICT = {"error": {"type": "api_error", "code": "service_unavailable",
                      "message": "The request met a conflicting change in the database and was not completed. "
                                 "Retry after the number of seconds in Retry-After (1).", "param": None}}


def _count(conn, sql, *params):
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchone()["count"]


def _request_in_a_deadlock(conn, database_url, client, token, send=None):
    """GET /organization (or `send`) while a script takes the request's two buckets in the opposite order; its
    response."""
    send = send or (lambda: client.get("/organization", headers=auth(token)))
    token_id = _count(conn, "SELECT id AS count FROM tokens")
    within_one_window(10, WINDOW_SECONDS)
    window = f"to_timestamp(floor(extract(epoch FROM now()) / {WINDOW_SECONDS}) * {WINDOW_SECONDS})"
    take = (f"INSERT INTO rate_limit_counters (bucket, window_start, hits) VALUES (%s, {window}, 1) "
            "ON CONFLICT (bucket, window_start) DO UPDATE SET hits = rate_limit_counters.hits + 1")
    script = psycopg2.connect(database_url)
    answered = []
    try:
        with script.cursor() as cur:
            cur.execute("SET deadlock_timeout = '60s'")  # the request waits 1 s: it is the one ended
            cur.execute(take, ("ip:127.0.0.1",))
            asking = threading.Thread(target=lambda: answered.append(send()))
            asking.start()
            assert wait_for(lambda: _count(conn, "SELECT count(*) FROM pg_stat_activity WHERE %s = "
                                                 "ANY(pg_blocking_pids(pid))", script.info.backend_pid) == 1, 20), \
                "the count holds the token's bucket and waits for the address's"
            cur.execute(take, (f"token:{token_id}",))
        script.commit()
        asking.join(20)
    finally:
        script.close()
    assert len(answered) == 1, "answered, not raised"
    return answered[0]


@pytest.fixture
def conflict_client(conn, database_url, tmp_path):
    """A client of an app whose window is WINDOW_SECONDS, and a token."""
    app = make_app(database_url, STORAGE_DIR=str(tmp_path / "storage"),
                   RATE_LIMITS={"window_seconds": WINDOW_SECONDS, "per_token": 1000, "per_ip": 1000,
                                "anonymous_per_ip": 1000})
    return app.test_client(), make_token(conn, make_org(conn, "acme"))


def test_a_deadlock_in_the_count_is_retried_and_counted_once(conn, database_url, conflict_client, caplog):
    client, token = conflict_client
    response = _request_in_a_deadlock(conn, database_url, client, token)
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.get_json()["object"] == "organization"
    assert response.headers["RateLimit"].startswith('"per_token";r=998;'), "the script's hit and the request's"
    assert "database conflict in the first statement, retrying" in caplog.text
    assert "deadlock detected" in caplog.text


def test_a_conflict_past_the_tries_is_a_503_with_retry_after(conn, database_url, conflict_client, monkeypatch):
    monkeypatch.setattr(db, "CONFLICT_TRIES", 1)
    client, token = conflict_client
    response = _request_in_a_deadlock(conn, database_url, client, token)
    assert response.status_code == 503
    assert response.get_json() == CONFLICT
    assert response.headers["Retry-After"] == "1"
    assert response.headers["Content-Type"] == "application/json"
    assert "Service-Version" not in response.headers
    assert _count(conn, "SELECT hits AS count FROM rate_limit_counters WHERE bucket LIKE 'token:%%'") == 1, \
        "only the script's hit: the request's count was rolled back"


def test_a_conflict_past_the_tries_on_mcp_is_a_json_rpc_error(conn, database_url, conflict_client, monkeypatch):
    # /mcp answers every refusal as a JSON-RPC error with the API's status and headers (mcp_server/http.py):
    # a conflict too, not the API's plain JSON body a JSON-RPC client cannot read.
    monkeypatch.setattr(db, "CONFLICT_TRIES", 1)
    client, token = conflict_client
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}
    headers = {**auth(token), "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    response = _request_in_a_deadlock(conn, database_url, client, token,
                                      send=lambda: client.post("/mcp", json=message, headers=headers))
    assert response.status_code == 503
    assert response.get_json() == {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32000, "message": CONFLICT["error"]["message"], "data": {"status": 503, **CONFLICT}}}
    assert response.headers["Retry-After"] == "1"
    assert response.headers["Content-Type"] == "application/json"
