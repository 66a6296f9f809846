"""A reservation of several buckets locks their rows in the order it is given (the guard gives the token's
bucket, then the address's), so two reservations of one address never take its rows the other way round."""
import threading

import psycopg2

from models import db, rate_limits
from tests.support.processes import wait_for

WINDOW_SECONDS = 300
WANTED = {"token:1": (600, 2), "ip:192.0.2.44": (1200, 4)}


def test_a_reservation_locks_the_buckets_in_the_order_given(conn, database_url):
    first = rate_limits.reserve(conn, WANTED, WINDOW_SECONDS)
    assert {bucket: granted for bucket, (_taken, granted, _resets_in) in first.items()} == {"token:1": 2,
                                                                                           "ip:192.0.2.44": 4}
    holding = psycopg2.connect(database_url)  # a transaction holding the address's row
    reserving, waiting = db.connect(database_url), db.connect(database_url)
    reserving.autocommit = waiting.autocommit = True
    outcome = []
    try:
        with holding.cursor() as cur:
            cur.execute("UPDATE rate_limit_counters SET hits = hits WHERE bucket = 'ip:192.0.2.44'")

        def reserve(connection):
            outcome.append(rate_limits.reserve(connection, WANTED, WINDOW_SECONDS))

        # The reservation takes the token's row, then waits for the address's ...
        threads = [threading.Thread(target=reserve, args=(reserving,))]
        threads[0].start()
        assert wait_for(lambda: _waiting_for_a_lock(conn, reserving.info.backend_pid), 10)
        # ... so a reservation of the token's bucket alone waits for it: the token's row was taken first.
        threads.append(threading.Thread(target=lambda: outcome.append(
            rate_limits.reserve(waiting, {"token:1": (600, 2)}, WINDOW_SECONDS))))
        threads[1].start()
        assert wait_for(lambda: _waiting_for_a_lock(conn, waiting.info.backend_pid), 10)
        holding.commit()
        for thread in threads:
            thread.join(30)
    finally:
        holding.close()
        reserving.close()
        waiting.close()
    # The token's row was the two-bucket reservation's before the other could take it (either may end first).
    assert sorted(({bucket: taken for bucket, (taken, _granted, _resets_in) in answer.items()} for answer in outcome),
                  key=len) == [{"token:1": 6}, {"token:1": 4, "ip:192.0.2.44": 8}]


def _waiting_for_a_lock(conn, pid):
    with conn.cursor() as cur:
        cur.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,))
        row = cur.fetchone()
    return row is not None and row["wait_event_type"] == "Lock"
