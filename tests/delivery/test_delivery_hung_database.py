"""The delivery process against a database that accepts connections and never answers (a TCP proxy switched to
hanging): it notices within its deadline and says so, keeps every outcome that finishes meanwhile, reconnects
with backoff (each try bounded by the connect timeout) and records them once the database answers: nothing
lost, nothing sent twice."""
import signal
import threading
import time
from collections import Counter

import pytest

from tests.support.factories import make_org
from tests.support.outages import proxy_to
from tests.support.processes import wait_for
from tests.support.webhooks import add_endpoint, pass_process


def _rows(conn, sql):
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()


class Output:
    """The lines a child process writes, read in a thread as they come."""

    def __init__(self, process):
        self.lines = []
        self.thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self.thread.start()

    def _read(self, process):
        for line in process.stdout:
            self.lines.append((time.monotonic(), line.decode()))

    def since(self, moment):
        """The text written after `moment` (monotonic)."""
        return "".join(line for at, line in self.lines if at >= moment)


@pytest.mark.slow
def test_the_watcher_waits_out_a_hung_database_and_loses_nothing(conn, database_url, receiver, ca_bundle):
    count = 8
    org = make_org(conn, "acme")
    add_endpoint(conn, org, receiver.url("/sleep/2", host="127.0.0.1"))
    with conn.cursor() as cur:
        cur.execute("INSERT INTO shipments (organization_id) SELECT %s FROM generate_series(1, %s)", (org, count))
        cur.execute("UPDATE shipments SET status = 'in_transit'")
    proxy = proxy_to(database_url).start()
    process = pass_process(proxy.url(database_url), ca_bundle, "--watch", WEBHOOK_PER_ENDPOINT=4,
                           DELIVERY_STATEMENT_TIMEOUT=1, DELIVERY_CONNECT_TIMEOUT=2)
    output = Output(process)
    try:
        assert wait_for(lambda: len(receiver.requests) >= 4, 20), output.since(0)
        proxy.hang()  # four requests in flight: their outcomes finish while the database hangs
        hung = time.monotonic()
        # Noticed within the deadline (1 s statement timeout + 3 s), whatever the process was waiting on.
        assert wait_for(lambda: "database not answering, reconnecting" in output.since(hung), 15), output.since(0)
        assert wait_for(lambda: "database unreachable, retrying" in output.since(hung), 15), output.since(0)
        time.sleep(2)  # the requests in flight finish; no connection to record them on
        proxy.forward()
        assert wait_for(lambda: _rows(conn, "SELECT state, count(*) FROM webhook_deliveries GROUP BY 1")
                        == [{"state": "succeeded", "count": count}], 30), output.since(0)
        assert process.poll() is None, "the watcher is still running"
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)
        proxy.stop()
    output.thread.join(10)
    process.stdout.close()
    assert process.returncode == 0, output.since(0)
    assert "database connection restored" in output.since(hung)
    received = Counter(request["headers"]["webhook-id"] for request in receiver.requests)
    assert received == {f"msg_{n}": 1 for n in range(1, count + 1)}, "nothing lost, nothing sent twice"
    assert Counter(row["state"] for row in _rows(conn, "SELECT state FROM webhook_attempts")) == {"succeeded": count}


@pytest.mark.slow
def test_a_watcher_stopped_while_the_database_hangs_exits_within_its_lease(conn, database_url, receiver,
                                                                            ca_bundle):
    count = 4
    org = make_org(conn, "acme")
    add_endpoint(conn, org, receiver.url("/sleep/1", host="127.0.0.1"))
    with conn.cursor() as cur:
        cur.execute("INSERT INTO shipments (organization_id) SELECT %s FROM generate_series(1, %s)", (org, count))
        cur.execute("UPDATE shipments SET status = 'in_transit'")
    proxy = proxy_to(database_url).start()
    process = pass_process(proxy.url(database_url), ca_bundle, "--watch", WEBHOOK_PER_ENDPOINT=4,
                           WEBHOOK_LEASE_SECONDS=6, DELIVERY_STATEMENT_TIMEOUT=1, DELIVERY_CONNECT_TIMEOUT=2)
    output = Output(process)
    try:
        assert wait_for(lambda: len(receiver.requests) == count, 20), output.since(0)
        proxy.hang()
        assert wait_for(lambda: "database not answering, reconnecting" in output.since(0), 15), output.since(0)
        process.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        process.wait(40)
        waited = time.monotonic() - stopped
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
        proxy.stop()
    output.thread.join(10)
    process.stdout.close()
    text = output.since(0)
    # It kept the outcomes as long as the leases last, then says what it could not record.
    assert process.returncode == 1 and waited < 30, (waited, text)
    assert f"database unreachable; {count} outcomes not recorded" in text, text
    assert "database unreachable, giving up" in text, text
    # Nothing lost: each attempt stays visibly in flight, and its lease brings the delivery back.
    assert _rows(conn, "SELECT state, count(*) FROM webhook_attempts GROUP BY 1") == [
        {"state": "in_flight", "count": count}]
    assert _rows(conn, "SELECT state, count(*) FROM webhook_deliveries GROUP BY 1") == [
        {"state": "pending", "count": count}]


@pytest.mark.slow
def test_a_hung_listen_database_does_not_hold_every_turn(conn, database_url, receiver, ca_bundle):
    """DATABASE_LISTEN_URL hangs: each try to listen waits the connect timeout, so it is tried again only
    after a backoff, and new events are found by polling meanwhile (about a second late)."""
    org = make_org(conn, "acme")
    add_endpoint(conn, org, receiver.url("/ok", host="127.0.0.1"))
    with conn.cursor() as cur:
        cur.execute("INSERT INTO shipments (organization_id) VALUES (%s) RETURNING id", (org,))
        sid = cur.fetchone()["id"]
    proxy = proxy_to(database_url).start()
    proxy.hang()
    process = pass_process(database_url, ca_bundle, "--watch", DATABASE_LISTEN_URL=proxy.url(database_url),
                           DELIVERY_CONNECT_TIMEOUT=3)
    output = Output(process)
    delays = []
    try:
        for status in ("validated", "error", "validated", "in_transit", "arrived"):
            with conn.cursor() as cur:
                cur.execute("UPDATE shipments SET status = %s WHERE id = %s", (status, sid))
            committed, count = time.time(), len(delays) + 1
            assert wait_for(lambda: len(receiver.requests) >= count, 30), output.since(0)
            delays.append(receiver.requests[-1]["arrived"] - committed)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)
        proxy.stop()
    output.thread.join(10)
    process.stdout.close()
    assert process.returncode == 0, output.since(0)
    # Each turn held for the connect timeout would make every delay about 3 s or more.
    assert sorted(delays)[2] < 2.5, delays
