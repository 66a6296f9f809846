"""`python -m delivery --watch`: woken by NOTIFY, delivers well within a second of the commit."""
import signal
import statistics
import threading
import time
import psycopg2
import pytest
from psycopg2.extensions import make_dsn, parse_dsn

from tests.support.factories import make_org, make_shipment
from tests.support.processes import wait_for
from tests.support.webhooks import add_endpoint, event_bodies, pass_process

# The shipment's statuses in order: each change after the first is one delivery to time.
STATUSES = ("draft", "validated", "error", "validated", "in_transit", "arrived")


@pytest.mark.slow
def test_watch_delivers_soon_after_commit(conn, database_url, receiver, ca_bundle):
    org = make_org(conn, "acme")
    sid = make_shipment(conn, org)
    add_endpoint(conn, org, receiver.url("/ok", host="127.0.0.1"))
    with pass_process(database_url, ca_bundle, "--watch") as process:
        try:
            time.sleep(2)  # let it start listening; a change made earlier would be found anyway
            delays = []
            for status in STATUSES[1:]:
                with conn.cursor() as cur:
                    cur.execute("UPDATE shipments SET status = %s WHERE id = %s", (status, sid))
                committed = time.time()
                count = len(delays) + 1
                assert wait_for(lambda: len(receiver.requests) >= count, seconds=10)
                delays.append(receiver.requests[-1]["arrived"] - committed)
            # Woken by NOTIFY, a delivery follows its commit in about 0.01 s. Without it each change after the
            # first waits out the sleep the previous delivery started: about 1.0 s when not listening (polling),
            # 5 s when listening and not woken. The median of five stays apart from both, and one delay
            # stretched by a loaded machine does not fail it.
            assert statistics.median(delays) < 0.5, delays
        finally:
            process.send_signal(signal.SIGTERM)
            output = process.communicate(timeout=30)[0].decode()
        assert process.returncode == 0, output
    assert [b["data"]["previous_attributes"]["status"] for b in event_bodies(receiver)] == list(STATUSES[:-1])


def test_watch_says_what_it_does_and_where_at_start(database_url, ca_bundle):
    """One line at start: what it does and which database it connects to, without the URL's password."""
    # A password in the URL (trust authentication ignores it), whatever the URL's form: a socket folder too.
    with_password = make_dsn(**{**parse_dsn(database_url), "password": "not-shown-pw"})
    where = psycopg2.connect(database_url)
    info = where.info
    expected = f"database={info.dbname} host={info.host} port={info.port} user={info.user}"
    where.close()
    with pass_process(with_password, ca_bundle, "--watch") as process:
        lines = []
        try:
            reader = threading.Thread(target=lambda: lines.extend(iter(process.stdout.readline, b"")), daemon=True)
            reader.start()
            assert wait_for(lambda: any(b"delivering webhooks" in line for line in lines), seconds=30), lines
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
            reader.join(10)
    output = b"".join(lines).decode()
    assert process.returncode == 0, output
    started = next(line for line in output.splitlines() if "delivering webhooks" in line)
    assert started.split(" ", 2)[2] == (
        "INFO delivery delivering webhooks until SIGTERM, each event within a second of its commit (woken by NOTIFY) "
        + expected)
    assert "not-shown-pw" not in output
