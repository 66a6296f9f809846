"""The rate-limit counters' rows are locked in one order by every statement that takes several: the count
(authenticate_and_count: the token's bucket, then the address's) and the move of a 304 to its budget
(count_not_modified). Taken the other way round, two requests of one token from one address deadlocked."""
import threading

import psycopg2
import psycopg2.errors

from models import db, rate_limits
from tests.support.factories import make_org, make_token
from tests.support.processes import wait_for

WINDOW_SECONDS = 300
ADDRESS = "192.0.2.44"


def test_a_304_moved_to_its_budget_takes_the_buckets_in_the_counts_order(conn, database_url):
    token = make_token(conn, make_org(conn))
    counted = rate_limits.authenticate_and_count(conn, _fingerprint(token), ADDRESS, WINDOW_SECONDS)
    buckets = list(counted.policies)  # the count's order: the token's bucket, then the address's
    assert [counted.policies[bucket] for bucket in buckets] == ["per_token", "per_ip"]
    token_bucket, address_bucket = buckets
    window_start = counted.counts[token_bucket].window_start

    counting = psycopg2.connect(database_url)  # a count of the same token and address, midway: token's row held
    mover = db.connect(database_url)
    mover.autocommit = True
    outcome = []
    try:
        with counting.cursor() as cur:
            cur.execute("UPDATE rate_limit_counters SET hits = hits + 1 WHERE bucket = %s AND window_start = %s",
                        (token_bucket, window_start))

        def move():
            try:
                outcome.append(rate_limits.count_not_modified(mover, buckets, "not_modified_" + token_bucket,
                                                              window_start, 6000, WINDOW_SECONDS))
            except psycopg2.Error as error:
                outcome.append(error)
        moving = threading.Thread(target=move)
        moving.start()
        assert wait_for(lambda: _waiting_for_a_lock(conn, mover.info.backend_pid), 10)
        with counting.cursor() as cur:  # the count goes on to the address's row: free, if the move waits first
            cur.execute("SET LOCAL lock_timeout = '5s'")
            cur.execute("UPDATE rate_limit_counters SET hits = hits + 1 WHERE bucket = %s AND window_start = %s",
                        (address_bucket, window_start))
        counting.commit()
        moving.join(30)
    finally:
        counting.close()
        mover.close()
    (moved,) = outcome
    assert not isinstance(moved, Exception), moved
    assert moved.hits == 1 and set(moved.given_back) == {token_bucket, address_bucket}


def _fingerprint(token):
    from models import tokens

    return tokens.fingerprint(token)


def _waiting_for_a_lock(conn, pid):
    with conn.cursor() as cur:
        cur.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,))
        row = cur.fetchone()
    return row is not None and row["wait_event_type"] == "Lock"
