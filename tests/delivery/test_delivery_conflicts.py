"""A deadlock between an operator's script and the recording of an attempt: `python -m delivery --watch`
retries the recording, keeps running and delivers afterwards.

The deadlock is PostgreSQL's own: a second connection (the operator's script) locks the delivery row
while its request is in flight, the recording then locks the endpoint and waits for the delivery row,
and the script asks for the endpoint. The script's own deadlock_timeout is long, so the recording is the
one PostgreSQL ends (40P01).
"""
import signal
import ssl
import threading

import psycopg2
import pytest

from tests.support.factories import make_org, make_shipment
from tests.support.processes import wait_for
from tests.support.webhooks import RECEIVER_HOST, RawReceiver, add_endpoint, pass_process

FAILED = b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\nnope"


def _rows(conn, sql, *params):
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def _blocked_by(conn, pid):
    """How many sessions wait for a lock `pid` holds."""
    return _rows(conn, "SELECT count(*) AS count FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                 pid)[0]["count"]


@pytest.mark.slow
def test_a_deadlock_in_the_recording_is_retried_and_the_watch_keeps_delivering(conn, database_url, ca, ca_bundle,
                                                                               receiver):
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(RECEIVER_HOST, "127.0.0.1").configure_cert(context)
    gate = threading.Event()
    failing = RawReceiver(context, [gate, FAILED])
    org = make_org(conn, "acme")
    endpoint = add_endpoint(conn, org, failing.url("/hook", host="127.0.0.1"))
    sid = make_shipment(conn, org)
    script = psycopg2.connect(database_url)
    process = pass_process(database_url, ca_bundle, "--watch")
    try:
        with conn.cursor() as cur:
            cur.execute("UPDATE shipments SET status = 'validated' WHERE id = %s", (sid,))
        assert wait_for(lambda: len(failing.requests) == 1, 20), "the request is in flight"
        with script.cursor() as cur:
            cur.execute("SET deadlock_timeout = '60s'")  # the other side waits 1 s: it is the one ended
            cur.execute("SELECT id FROM webhook_deliveries WHERE endpoint_id = %s FOR UPDATE", (endpoint["id"],))
            gate.set()
            assert wait_for(lambda: _blocked_by(conn, script.info.backend_pid) == 1, 20), \
                "the recording waits for the delivery row, holding the endpoint's"
            cur.execute("SELECT id FROM webhook_endpoints WHERE id = %s FOR UPDATE", (endpoint["id"],))
        script.commit()

        assert wait_for(lambda: _rows(conn, "SELECT state, attempt_count, last_status_code FROM webhook_deliveries")
                        == [{"state": "pending", "attempt_count": 1, "last_status_code": 500}], 20), \
            "the failed attempt is recorded"
        assert process.poll() is None, process.stdout.read().decode()
        add_endpoint(conn, org, receiver.url("/ok", host="127.0.0.1"))
        with conn.cursor() as cur:
            cur.execute("UPDATE shipments SET status = 'in_transit' WHERE id = %s", (sid,))
        assert wait_for(lambda: len(receiver.requests) == 1, 20), "the next event is delivered"
    finally:
        gate.set()
        script.close()
        failing.close()
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=30)[0].decode()
    assert process.returncode == 0, output
    assert "Traceback" not in output, output
    assert output.count("database conflict, turn retried") == 1, output
    assert "deadlock detected" in output, output
