"""Rate limits: per token, per IP across tokens, without a token per IP; Retry-After; shared by workers."""
import json
import math
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.support import ROOT
from tests.support.factories import auth, make_org, make_token
from tests.support.processes import free_port, stop, wait_for
from tests.support.windows import within_one_window

RATE_LIMITED = {"error": {"type": "rate_limit_error", "code": "rate_limited",
                          "message": "Too many requests. Wait for the number of seconds in Retry-After, then retry.",
                          "param": None}}
NO_TOKEN_CAUSE = "Too many requests without a valid API token from this address:"
FAILED_CAUSE = ("Too many failed authentications from this address: the API token sent is invalid, expired or "
                "revoked, or its user left the organization, and")


def without_token(limit, cause=NO_TOKEN_CAUSE, window="5 minutes"):
    """The expected 429 message past the budget without a valid token, given Retry-After."""
    return lambda seconds: (f"{cause} requests without a valid token (failed authentications included) are "
                            f"limited to {limit} per {window} per address. The count resets in {seconds} "
                            f"second{'' if seconds == 1 else 's'} (Retry-After).")


def limited_app(database_url, tmp_path, **limits):
    from app import create_app

    config = {"window_seconds": 300, "per_token": 1000, "per_ip": 1000, "anonymous_per_ip": 1000, **limits}
    extra = config.pop("config", {})
    within_one_window(2, config["window_seconds"])  # a test's few requests never straddle a window's end
    return create_app({"TESTING": True, "DATABASE_URL": database_url, "RATE_LIMITS": config,
                       "STORAGE_DIR": str(tmp_path / "storage"), **extra})


def seconds_left_in_window(conn, window=300):
    with conn.cursor() as cur:
        cur.execute("SELECT extract(epoch FROM now()) AS now")
        now = float(cur.fetchone()["now"])
    return (math.floor(now / window) + 1) * window - now


def assert_429(response, conn=None, window=300, message=None):
    """A 429 with the generic body, or with `message(Retry-After)` as its message."""
    assert response.status_code == 429
    assert response.headers["Content-Type"] == "application/json"
    assert "Service-Version" not in response.headers
    assert "WWW-Authenticate" not in response.headers
    retry_after = response.headers["Retry-After"]
    assert retry_after.isdigit() and 1 <= int(retry_after) <= window
    if message is None:
        assert response.json == RATE_LIMITED
    else:
        assert response.json == {"error": {"type": "rate_limit_error", "code": "rate_limited",
                                           "message": message(int(retry_after)), "param": None}}
    if conn is not None:
        assert abs(int(retry_after) - seconds_left_in_window(conn, window)) <= 2
    # The limit shown is spent, and its window ends when Retry-After does.
    policy, remaining, reset = rate_limit(response)
    assert (remaining, reset) == (0, int(retry_after))
    assert response.headers["RateLimit-Policy"].startswith(f'"{policy}";q=')


def rate_limit(response):
    """(policy, r, t) of the RateLimit header: `"<policy>";r=<remaining>;t=<seconds until reset>`."""
    match = re.fullmatch(r'"(per_token|per_ip|anonymous_per_ip)";r=([0-9]+);t=([0-9]+)', response.headers["RateLimit"])
    assert match, response.headers["RateLimit"]
    return match[1], int(match[2]), int(match[3])


def assert_rate_limit(response, conn, policy, quota, remaining, window=300):
    """RateLimit-Policy and RateLimit name `policy` with its quota, what is left and the window's end."""
    assert response.headers["RateLimit-Policy"] == f'"{policy}";q={quota};w={window}'
    shown, left, reset = rate_limit(response)
    assert (shown, left) == (policy, remaining)
    assert 1 <= reset <= window and abs(reset - seconds_left_in_window(conn, window)) <= 2


def ip(address):
    return {"REMOTE_ADDR": address}


def test_per_token_limit(conn, database_url, tmp_path):
    org_id = make_org(conn, "acme")
    first, second = make_token(conn, org_id), make_token(conn, org_id, name="second")
    client = limited_app(database_url, tmp_path, per_token=3).test_client()
    for _ in range(3):
        assert client.get("/organization", headers=auth(first)).status_code == 200
    assert_429(client.get("/organization", headers=auth(first)), conn)
    # Every endpoint counts, and a limited token stays limited on all of them.
    assert_429(client.get("/shipments", headers=auth(first)), conn)
    assert_429(client.get("/nope", headers=auth(first)), conn)
    assert client.get("/organization", headers=auth(second)).status_code == 200


def test_per_ip_limit_across_tokens(conn, database_url, tmp_path):
    acme, globex = make_org(conn, "acme"), make_org(conn, "globex")
    tokens = [make_token(conn, acme), make_token(conn, globex)]
    client = limited_app(database_url, tmp_path, per_ip=4).test_client()
    for n in range(4):
        response = client.get("/organization", headers=auth(tokens[n % 2]), environ_base=ip("203.0.113.5"))
        assert response.status_code == 200
    for token in tokens:
        assert_429(client.get("/organization", headers=auth(token), environ_base=ip("203.0.113.5")), conn)
    assert client.get("/organization", headers=auth(tokens[0]), environ_base=ip("203.0.113.6")).status_code == 200


@pytest.mark.parametrize("path", ["/openapi.json", "/organization", "/nope"])
def test_anonymous_limit_per_ip(conn, database_url, tmp_path, path):
    token = make_token(conn, make_org(conn, "acme"))
    client = limited_app(database_url, tmp_path, anonymous_per_ip=3).test_client()
    expected = {"/openapi.json": 200, "/organization": 401, "/nope": 404}[path]
    for _ in range(3):
        assert client.get(path, environ_base=ip("198.51.100.7")).status_code == expected
    assert_429(client.get(path, environ_base=ip("198.51.100.7")), conn, message=without_token(3))
    # The 429 comes before authentication: no WWW-Authenticate.
    assert "WWW-Authenticate" not in client.get("/organization", environ_base=ip("198.51.100.7")).headers
    assert client.get(path, environ_base=ip("198.51.100.8")).status_code == expected
    # Requests with a token from the same address are not anonymous.
    assert client.get("/organization", headers=auth(token), environ_base=ip("198.51.100.7")).status_code == 200


DOCS_LOAD = ("/docs", "/docs/swagger-ui.css", "/docs/swagger-ui-bundle.js", "/docs/docs-init.js",
             "/docs/favicon-32x32.png", "/openapi.json")  # what a browser fetches for one cold load of /docs


def test_the_docs_page_and_its_files_are_not_counted(database_url, tmp_path):
    client = limited_app(database_url, tmp_path, anonymous_per_ip=10).test_client()
    for _load in range(10):
        for path in DOCS_LOAD:
            response = client.get(path, environ_base=ip("198.51.100.9"))
            assert response.status_code == 200, (path, response.data[:200])
            if path != "/openapi.json":
                assert "RateLimit" not in response.headers and "RateLimit-Policy" not in response.headers, path
            response.close()  # a file's body is streamed
    # Only the ten descriptions counted: the eleventh is the limit's first refusal, the page itself never one.
    assert_429(client.get("/openapi.json", environ_base=ip("198.51.100.9")), None, message=without_token(10))
    assert client.get("/docs", environ_base=ip("198.51.100.9")).status_code == 200


@pytest.mark.parametrize("value, cause", [("sv_" + "x" * 40, FAILED_CAUSE), ("nonsense", FAILED_CAUSE),
                                          ("", NO_TOKEN_CAUSE)])
def test_invalid_tokens_count_as_anonymous(conn, database_url, tmp_path, value, cause):
    make_org(conn, "acme")
    client = limited_app(database_url, tmp_path, anonymous_per_ip=2).test_client()
    headers = {"Authorization": f"Bearer {value}"}
    assert client.get("/openapi.json").status_code == 200
    assert client.get("/organization", headers=headers).status_code == 401
    assert_429(client.get("/organization", headers=headers), conn, message=without_token(2, cause))
    assert_429(client.get("/openapi.json"), conn, message=without_token(2))


INVALID_TOKEN = {"error": {"type": "authentication_error", "code": "invalid_token",
                           "message": "The API token is invalid, expired or revoked, or its user left the "
                                      "organization.", "param": None}}


def spoil(conn, token, how):
    """Make a real token fail the way `how` says; returns the value to send."""
    with conn.cursor() as cur:
        if how == "expired":
            cur.execute("UPDATE tokens SET expires_at = now() - interval '1 second'")
        elif how == "revoked":
            cur.execute("UPDATE tokens SET revoked_at = now()")
        elif how == "member_removed":
            cur.execute("UPDATE memberships SET removed_at = now() WHERE role = 'owner'")
    return {"never_issued": "sv_" + "A1b2C3d4E5" * 4, "malformed": "sv_short"}.get(how, token)


@pytest.mark.parametrize("how", ["never_issued", "malformed", "expired", "revoked", "member_removed"])
def test_failed_authentications_are_401_until_their_budget_is_spent(conn, database_url, tmp_path, how):
    org_id = make_org(conn, "acme")
    bad = spoil(conn, make_token(conn, org_id), how)
    good = make_token(conn, org_id, email="admin@acme.example")
    client = limited_app(database_url, tmp_path, anonymous_per_ip=3).test_client()
    for _ in range(3):
        response = client.get("/shipments", headers=auth(bad), environ_base=ip("203.0.113.9"))
        assert response.status_code == 401
        assert response.json == INVALID_TOKEN
        assert response.headers["WWW-Authenticate"] == 'Bearer realm="Shipment Tracking API", error="invalid_token"'
    # Spent: the 429 names failed authentications and the wait, not just "too many requests".
    for _ in range(2):
        assert_429(client.get("/shipments", headers=auth(bad), environ_base=ip("203.0.113.9")), conn,
                   message=without_token(3, FAILED_CAUSE))
    # The budget is shared with requests without a token from that address...
    assert_429(client.get("/openapi.json", environ_base=ip("203.0.113.9")), conn, message=without_token(3))
    # ...but a valid token from the same address has budgets of its own, which bad tokens never touch.
    for _ in range(3):
        response = client.get("/organization", headers=auth(good), environ_base=ip("203.0.113.9"))
        assert response.status_code == 200
        assert response.headers["Service-Version"] == "2026-10-01"
    # Another address has its own budget.
    assert client.get("/shipments", headers=auth(bad), environ_base=ip("203.0.113.10")).json == INVALID_TOKEN


def test_default_budget_is_30_failed_authentications(conn, database_url, tmp_path):
    from app import create_app

    make_org(conn, "acme")
    client = create_app({"TESTING": True, "DATABASE_URL": database_url,
                         "STORAGE_DIR": str(tmp_path / "storage")}).test_client()
    bad = auth("sv_" + "x" * 40)
    assert [client.get("/organization", headers=bad).status_code for _ in range(30)] == [401] * 30
    assert_429(client.get("/organization", headers=bad), conn, message=without_token(30, FAILED_CAUSE))


def test_budget_message_follows_the_window(conn, database_url, tmp_path):
    make_org(conn, "acme")
    client = limited_app(database_url, tmp_path, anonymous_per_ip=1, window_seconds=90).test_client()
    assert client.get("/organization", headers=auth("sv_" + "x" * 40)).status_code == 401
    assert_429(client.get("/organization", headers=auth("sv_" + "x" * 40)), conn, window=90,
               message=without_token(1, FAILED_CAUSE, window="90 seconds"))


def test_a_spent_window_is_known_until_it_ends_then_a_new_one_counts(conn, database_url, tmp_path):
    token = make_token(conn, make_org(conn, "acme"))
    client = limited_app(database_url, tmp_path, per_token=1, window_seconds=4).test_client()
    assert client.get("/organization", headers=auth(token)).status_code == 200
    refused = client.get("/organization", headers=auth(token))
    assert_429(refused, conn, window=4)
    with conn.cursor() as cur:
        # The shared count forgets the window: a reservation now would get the request. The process knows the
        # window is spent, and reserves nothing until it ends.
        cur.execute("DELETE FROM rate_limit_counters")
        again = client.get("/organization", headers=auth(token))
        assert_429(again, conn, window=4)
        cur.execute("SELECT count(*) FROM rate_limit_counters")
        assert cur.fetchone()["count"] == 0
    time.sleep(int(again.headers["Retry-After"]) + 0.1)
    assert client.get("/organization", headers=auth(token)).status_code == 200
    assert_429(client.get("/organization", headers=auth(token)), conn, window=4)


def test_retry_after_follows_the_window(conn, database_url, tmp_path):
    token = make_token(conn, make_org(conn, "acme"))
    client = limited_app(database_url, tmp_path, per_token=1, window_seconds=60).test_client()
    client.get("/organization", headers=auth(token))
    assert_429(client.get("/organization", headers=auth(token)), conn, window=60)


def test_counters_live_in_an_unlogged_table(conn, database_url, tmp_path):
    token = make_token(conn, make_org(conn, "acme"))
    client = limited_app(database_url, tmp_path).test_client()
    client.get("/organization", headers=auth(token), environ_base=ip("192.0.2.1"))
    client.get("/openapi.json", environ_base=ip("192.0.2.1"))
    with conn.cursor() as cur:
        cur.execute("SELECT relpersistence FROM pg_class WHERE relname = 'rate_limit_counters'")
        assert cur.fetchone()["relpersistence"] == "u"
        # Each bucket's first reservation: a second of requests at the rate its limit allows (1000 per 300 s).
        cur.execute("SELECT bucket, hits FROM rate_limit_counters ORDER BY bucket")
        assert [(row["bucket"], row["hits"]) for row in cur.fetchall()] == [
            ("anonymous:192.0.2.1", 4), ("ip:192.0.2.1", 4), ("token:1", 4)]


def test_forwarded_for_ignored_without_trusted_proxies(conn, database_url, tmp_path):
    make_org(conn, "acme")
    client = limited_app(database_url, tmp_path, anonymous_per_ip=1).test_client()
    assert client.get("/openapi.json", headers={"X-Forwarded-For": "192.0.2.1"}).status_code == 200
    # A client cannot dodge the limit by claiming another address.
    assert_429(client.get("/openapi.json", headers={"X-Forwarded-For": "192.0.2.2"}), conn,
               message=without_token(1))


def test_forwarded_for_used_with_one_trusted_proxy(conn, database_url, tmp_path):
    make_org(conn, "acme")
    client = limited_app(database_url, tmp_path, anonymous_per_ip=1,
                         config={"TRUSTED_PROXIES": 1}).test_client()
    assert client.get("/openapi.json", headers={"X-Forwarded-For": "192.0.2.1"}).status_code == 200
    assert_429(client.get("/openapi.json", headers={"X-Forwarded-For": "192.0.2.1"}), conn,
               message=without_token(1))
    # The proxy appends the real client; an earlier, client-written hop is not trusted.
    assert client.get("/openapi.json", headers={"X-Forwarded-For": "192.0.2.1, 192.0.2.2"}).status_code == 200
    assert_429(client.get("/openapi.json", headers={"X-Forwarded-For": "192.0.2.9, 192.0.2.2"}), conn,
               message=without_token(1))


# --- RateLimit-Policy and RateLimit (draft-ietf-httpapi-ratelimit-headers-11) ------------------

def test_rate_limit_headers_of_a_token(conn, database_url, tmp_path):
    token = make_token(conn, make_org(conn, "acme"))
    client = limited_app(database_url, tmp_path, per_token=5).test_client()
    for remaining in (4, 3, 2):
        response = client.get("/organization", headers=auth(token))
        assert response.status_code == 200
        assert_rate_limit(response, conn, "per_token", 5, remaining)
    # Errors after the count carry them too, Service-Version alongside.
    response = client.get("/shipments/shp_999", headers=auth(token))
    assert response.status_code == 404 and "Service-Version" in response.headers
    assert_rate_limit(response, conn, "per_token", 5, 1)
    assert_rate_limit(client.get("/nope", headers=auth(token)), conn, "per_token", 5, 0)
    response = client.get("/organization", headers=auth(token))
    assert_429(response, conn)
    assert_rate_limit(response, conn, "per_token", 5, 0)
    assert response.headers["RateLimit"] == f'"per_token";r=0;t={response.headers["Retry-After"]}'


def test_rate_limit_headers_show_the_closest_limit(conn, database_url, tmp_path):
    acme = make_org(conn, "acme")
    first, second = make_token(conn, acme), make_token(conn, acme, name="second")
    client = limited_app(database_url, tmp_path, per_token=3, per_ip=4, window_seconds=60).test_client()
    address = ip("203.0.113.9")
    # The token's own budget runs out first...
    client.get("/organization", headers=auth(first), environ_base=address)
    response = client.get("/organization", headers=auth(first), environ_base=address)
    assert_rate_limit(response, conn, "per_token", 3, 1, window=60)
    # ...then the address's, shared with the first token, for a fresh token.
    response = client.get("/organization", headers=auth(second), environ_base=address)
    assert_rate_limit(response, conn, "per_ip", 4, 1, window=60)
    response = client.get("/organization", headers=auth(second), environ_base=address)
    assert response.status_code == 200
    assert_rate_limit(response, conn, "per_ip", 4, 0, window=60)
    response = client.get("/organization", headers=auth(second), environ_base=address)
    assert_429(response, conn, window=60)
    assert response.headers["RateLimit-Policy"] == '"per_ip";q=4;w=60'
    # Another address: the address has plenty left, the token's own count is the closest.
    response = client.get("/organization", headers=auth(second), environ_base=ip("203.0.113.10"))
    assert_rate_limit(response, conn, "per_token", 3, 0, window=60)


def test_rate_limit_headers_without_a_valid_token(conn, database_url, tmp_path):
    make_org(conn, "acme")
    client = limited_app(database_url, tmp_path, anonymous_per_ip=3).test_client()
    address = ip("198.51.100.20")
    assert_rate_limit(client.get("/openapi.json", environ_base=address), conn, "anonymous_per_ip", 3, 2)
    response = client.get("/organization", headers=auth("sv_" + "x" * 40), environ_base=address)
    assert response.status_code == 401
    assert_rate_limit(response, conn, "anonymous_per_ip", 3, 1)
    response = client.get("/nope", environ_base=address)
    assert response.status_code == 404
    assert_rate_limit(response, conn, "anonymous_per_ip", 3, 0)
    response = client.get("/organization", environ_base=address)
    assert_429(response, conn, message=without_token(3))
    assert_rate_limit(response, conn, "anonymous_per_ip", 3, 0)


def test_openapi_declares_the_rate_limit_headers(client):
    description = client.get("/openapi.json").json
    headers = description["components"]["headers"]
    for name in ("RateLimitPolicy", "RateLimit"):
        assert headers[name]["schema"] == {"type": "string"} and headers[name]["description"]
    for path, item in description["paths"].items():
        for status, response in item["get"]["responses"].items():
            # The database is away: not counted, Retry-After instead (tests/database/test_outages.py).
            if status == "503":
                assert set(response["headers"]) == {"Retry-After", "X-Request-Id"}, (path, status)
                continue
            assert response["headers"]["RateLimit-Policy"] == {"$ref": "#/components/headers/RateLimitPolicy"}, \
                (path, status)
            assert response["headers"]["RateLimit"] == {"$ref": "#/components/headers/RateLimit"}, (path, status)


# --- gunicorn: the limits are shared by every worker ------------------------------------------

@pytest.mark.slow
def test_limits_shared_by_gunicorn_workers(conn, database_url, tmp_path):
    token = make_token(conn, make_org(conn, "acme"))
    port = free_port()
    access_log, error_log = tmp_path / "access.log", tmp_path / "error.log"
    env = {**os.environ, "DATABASE_URL": database_url,
           "SHIPTRACK_RATE_LIMITS": json.dumps({"window_seconds": 300, "per_token": 5, "per_ip": 100,
                                                "anonymous_per_ip": 3})}
    # Sync workers: the test holds one with a silent connection, which a threaded worker would not wait on.
    command = [str(Path(sys.executable).parent / "gunicorn"), "-k", "sync", "--threads", "1", "-w", "2",
               "-b", f"127.0.0.1:{port}",
               "--access-logfile", str(access_log), "--access-logformat", "%(p)s %(s)s",
               "--error-logfile", str(error_log), "app:create_app()"]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    idle = []
    try:
        assert wait_for(lambda: error_log.exists() and error_log.read_text().count("Booting worker") == 2)
        within_one_window(30)
        base = f"http://127.0.0.1:{port}"
        session = requests.Session()
        # Each request on a new connection.
        session.headers.update({"Connection": "close", **auth(token)})

        def hold_a_worker():
            # A sync worker that accepted a silent connection waits on it; the other one serves.
            sock = socket.create_connection(("127.0.0.1", port))
            idle.append(sock)
            time.sleep(0.5)

        hold_a_worker()
        statuses = [session.get(f"{base}/organization", timeout=10).status_code for _ in range(3)]
        hold_a_worker()                 # now the worker that served the three is held too...
        idle.pop(0).close()             # ...and the first one is released
        time.sleep(0.5)
        responses = [session.get(f"{base}/organization", timeout=10) for _ in range(3)]
        statuses += [response.status_code for response in responses]
        assert statuses == [200, 200, 200, 200, 200, 429]
        assert RATE_LIMITED == responses[-1].json()
        assert 1 <= int(responses[-1].headers["Retry-After"]) <= 300
        assert "Service-Version" not in responses[-1].headers
        idle.pop().close()
        anonymous = [requests.get(f"{base}/openapi.json", headers={"Connection": "close"}, timeout=10)
                     for _ in range(4)]
        assert [response.status_code for response in anonymous] == [200, 200, 200, 429]
        assert wait_for(lambda: len(access_log.read_text().split("\n")) > 10)
        lines = [line.split() for line in access_log.read_text().splitlines()]
        by_worker = {}
        for pid, status in lines[:6]:
            by_worker.setdefault(pid, []).append(status)
        # Two workers served the token's requests, and the second saw the first one's counts.
        assert list(by_worker.values()) == [["200", "200", "200"], ["200", "200", "429"]]
    finally:
        for sock in idle:
            sock.close()
        stop(process)


def test_default_limits_are_the_spec_values(database_url):
    from app import create_app

    assert create_app({"DATABASE_URL": database_url}).config["RATE_LIMITS"] == {
        "window_seconds": 300, "per_token": 600, "per_ip": 1200, "anonymous_per_ip": 30,
        # The 304 budgets: ten times the limit each bounds.
        "not_modified_per_token": 6000, "not_modified_anonymous_per_ip": 300}


def test_openapi_says_failed_authentications_are_counted(client):
    description = client.get("/openapi.json").json
    for path, item in description["paths"].items():
        text = item["get"]["responses"]["429"]["description"]
        assert text.startswith("A rate limit was hit (`rate_limited`); `Retry-After` gives seconds to wait."), path
        assert "failed authentications (a wrong, expired or revoked token) count toward it" in text, path
        assert "A valid token from the same address is counted separately" in text, path
