"""`python -m delivery --watch`: woken by NOTIFY, delivers within about a second of the commit."""
import signal
import time

import pytest

from tests.support.factories import make_org, make_shipment
from tests.support.processes import wait_for
from tests.support.webhooks import add_endpoint, event_bodies, pass_process


@pytest.mark.slow
def test_watch_delivers_soon_after_commit(conn, database_url, receiver, ca_bundle):
    org = make_org(conn, "acme")
    sid = make_shipment(conn, org)
    add_endpoint(conn, org, receiver.url("/ok", host="127.0.0.1"))
    with pass_process(database_url, ca_bundle, "--watch") as process:
        try:
            time.sleep(2)  # let it start listening; a change made earlier would be found anyway
            delays = []
            for status in ("validated", "in_transit", "arrived"):
                with conn.cursor() as cur:
                    cur.execute("UPDATE shipments SET status = %s WHERE id = %s", (status, sid))
                committed = time.time()
                count = len(delays) + 1
                assert wait_for(lambda: len(receiver.requests) >= count, seconds=10)
                delays.append(receiver.requests[-1]["arrived"] - committed)
            assert max(delays) < 1.0, delays
        finally:
            process.send_signal(signal.SIGTERM)
            output = process.communicate(timeout=30)[0].decode()
        assert process.returncode == 0, output
    assert [b["data"]["previous_attributes"]["status"] for b in event_bodies(receiver)] == [
        "draft", "validated", "in_transit"]
