"""A transaction pooler's URL pasted as is (SHIPTRACK_DATABASE_POOLER unset), under gunicorn as the README starts it.

A real PgBouncer in transaction mode with two server connections for all of gunicorn's connections, a few
hundred requests from eight clients over every route and MCP: no 500, every answer as direct (fuzzy
search included), nothing left on the server connections that other clients then use, and each worker
saying once that it found a pooler.
"""
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from tests.database.test_pooler import MCP_HEADERS, answers, paths_of
from tests.support import ROOT
from tests.support.apps import NO_RATE_LIMITS
from tests.support.pgbouncer import PgBouncer
from tests.support.processes import free_port, stop, wait_listening

CLIENTS, ROUNDS = 8, 12
FOUND = "a pooler is between"


@pytest.fixture
def bouncer(server_url):
    """PgBouncer in transaction mode with two server connections per database: interleaving is certain."""
    started = PgBouncer(server_url, "transaction", pool_size=2).start()
    yield started
    started.close()


def start_gunicorn(url, storage, log):
    """The service as the README starts it (two workers), on `url`, logging JSON to `log`; (process, base URL)."""
    port = free_port()
    settings = {"RATE_LIMITS": NO_RATE_LIMITS, "STORAGE_DIR": storage, "LOG_FORMAT": "json"}
    env = {**os.environ, "DATABASE_URL": url,
           **{f"SHIPTRACK_{key}": json.dumps(value) for key, value in settings.items()}}
    env.pop("SHIPTRACK_DATABASE_POOLER", None)
    command = [str(Path(sys.executable).parent / "gunicorn"), "-c", "gunicorn.conf.py", "-w", "2",
               "-b", f"127.0.0.1:{port}", "app:create_app()"]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log)
    wait_listening(process, port, "gunicorn", lambda: Path(log.name).read_text())
    return process, f"http://127.0.0.1:{port}"


def over_http(session, base, headers, key):
    """(status, ETag, body) of one of test_pooler.answers' keys: a path, or an MCP method."""
    if key.startswith("/"):
        response = session.get(base + key, headers=headers, timeout=30)
    else:
        call = {"method": key}
        if key == "tools/call":
            call["params"] = {"name": "list_shipments", "arguments": {"limit": 5}}
        response = session.post(base + "/mcp", json={"jsonrpc": "2.0", "id": 1, **call},
                                 headers={**headers, **MCP_HEADERS}, timeout=30)
    return response.status_code, response.headers.get("ETag"), response.content


@pytest.mark.slow
def test_gunicorn_through_an_undeclared_transaction_pooler_answers_as_direct(bouncer, demo_database, tmp_path):
    direct_client, headers = demo_database.app.test_client(), demo_database.headers
    direct = answers(direct_client, headers, paths_of(direct_client, headers))
    assert all(status < 500 for status, _etag, _body in direct.values())
    keys = list(direct)
    log_path = tmp_path / "gunicorn.log"
    with open(log_path, "w") as log:
        process, base = start_gunicorn(bouncer.url(demo_database.url), demo_database.app.config["STORAGE_DIR"], log)
        try:
            def client(number):
                with requests.Session() as session:
                    # Each client starts elsewhere in the list: different routes run at the same time.
                    order = keys[number * 3:] + keys[:number * 3]
                    return [(key, over_http(session, base, headers, key)) for _ in range(ROUNDS) for key in order]
            with ThreadPoolExecutor(CLIENTS) as pool:
                found = [each for answered in pool.map(client, range(CLIENTS)) for each in answered]
        finally:
            stop(process)
    assert len(found) == CLIENTS * ROUNDS * len(keys) > 300
    assert [key for key, (status, _etag, _body) in found if status >= 500] == []
    assert [key for key, answer in found if answer != direct[key]] == []
    assert bouncer.server_sessions(demo_database.url) == [[]] * bouncer.pool_size
    lines = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    workers = {line["pid"] for line in lines if line["message"].startswith("Booting worker")}
    said = [line["pid"] for line in lines if FOUND in line["message"]]
    # Once in each process that connected: both workers (and the master, which opens the app first).
    assert len(workers) == 2 and workers <= set(said) and len(said) == len(set(said)), log_path.read_text()
