"""The delivery process's schedule: housekeeping on its interval, stop and close, a lost connection made again."""
import dataclasses
import logging
import threading
import time
from datetime import timedelta

import pytest

from delivery import connection
from delivery.connection import Link
from delivery.worker import DatabaseUnavailable, Dispatcher
from models import db
from tests.support.factories import make_org
from tests.support.processes import wait_for
from tests.support.webhooks import add_endpoint, resolver, run_pass


def _events(conn, url, count):
    org = make_org(conn, "acme")
    add_endpoint(conn, org, url)
    with conn.cursor() as cur:
        cur.execute("INSERT INTO shipments (organization_id) SELECT %s FROM generate_series(1, %s)", (org, count))
        cur.execute("UPDATE shipments SET status = 'in_transit'")


def _count(conn, sql):
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchone()["count"]


def test_housekeeping_prunes_the_rate_limit_windows_that_ended_long_ago(conn, settings):
    with conn.cursor() as cur:
        cur.execute("INSERT INTO rate_limit_counters (bucket, window_start, hits) VALUES "
                    "('token:old', now() - interval '1 day', 3), ('token:now', now(), 2)")
    run_pass(settings, seconds=0.1)
    assert [row["bucket"] for row in _rows(conn, "SELECT bucket FROM rate_limit_counters")] == ["token:now"]


def _rows(conn, sql):
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()


def _old_window(conn, bucket):
    with conn.cursor() as cur:
        cur.execute("INSERT INTO rate_limit_counters (bucket, window_start, hits) VALUES "
                    "(%s, now() - interval '1 day', 3)", (bucket,))


def test_housekeeping_takes_its_turn_on_its_schedule(conn, settings):
    _old_window(conn, "token:first")
    dispatcher = Dispatcher(settings)
    watching = threading.Thread(target=dispatcher.watch, kwargs={"idle_seconds": 0.1, "housekeeping_seconds": 3600},
                                daemon=True)
    try:
        watching.start()
        assert wait_for(lambda: _rows(conn, "SELECT bucket FROM rate_limit_counters") == [], 10), "at the start"
        _old_window(conn, "token:second")
        time.sleep(1.0)  # ten idle turns of the loop
        assert [row["bucket"] for row in _rows(conn, "SELECT bucket FROM rate_limit_counters")] == ["token:second"], \
            "not again before its hour"
        dispatcher.stop()
        watching.join(10)
        assert not watching.is_alive()
    finally:
        dispatcher.close()


def test_a_stopped_pass_claims_nothing_and_leaves_the_work_for_the_next(conn, receiver, settings):
    _events(conn, receiver.url("/ok", host="127.0.0.1"), 2)
    dispatcher = Dispatcher(settings, sender=settings.make_sender(resolver))
    try:
        dispatcher.stop()
        started = time.monotonic()
        dispatcher.run_pass(5)
        assert time.monotonic() - started < 4, "returned without waiting out its time"
    finally:
        dispatcher.close()
    assert receiver.requests == []
    assert _count(conn, "SELECT count(*) FROM webhook_deliveries WHERE state = 'pending'") == 2
    assert _count(conn, "SELECT count(*) FROM webhook_deliveries WHERE lease_token IS NOT NULL") == 0


def test_stop_ends_a_watch_and_close_records_what_was_in_flight(conn, receiver, settings):
    _events(conn, receiver.url("/sleep/0.5", host="127.0.0.1"), 3)
    dispatcher = Dispatcher(settings, sender=settings.make_sender(resolver))
    watching = threading.Thread(target=dispatcher.watch, daemon=True)
    try:
        watching.start()
        assert wait_for(lambda: len(receiver.requests) == 3, 10)
        dispatcher.stop()
        watching.join(10)
        assert not watching.is_alive()
    finally:
        dispatcher.close()
    assert _count(conn, "SELECT count(*) FROM webhook_deliveries WHERE state = 'succeeded'") == 3
    assert _count(conn, "SELECT count(*) FROM webhook_attempts WHERE state = 'in_flight'") == 0


def test_a_lost_connection_is_reconnected_and_a_lost_database_given_up(conn, settings, monkeypatch, caplog):
    caplog.set_level(logging.INFO, "delivery")
    dispatcher = Dispatcher(settings)
    try:
        lost = dispatcher.link.conn.get_backend_pid()
        _rows(conn, f"SELECT pg_terminate_backend({lost}) AS count")
        assert dispatcher.link.run(lambda: _rows(dispatcher.link.conn, "SELECT 1"), None) is None, "cut, reconnected"
        assert caplog.text.count("database connection restored") == 1
        assert dispatcher.link.conn.get_backend_pid() != lost
        assert dispatcher.link.run(lambda: "answered", None) == "answered"

        _rows(conn, f"SELECT pg_terminate_backend({dispatcher.link.conn.get_backend_pid()}) AS count")

        def refused(target):
            raise db.DatabaseUnavailable("connection refused (the test's outage)")  # what db.connect raises
        monkeypatch.setattr(db, "connect", refused)
        with pytest.raises(DatabaseUnavailable):
            dispatcher.link.run(lambda: _rows(dispatcher.link.conn, "SELECT 1"), time.monotonic())
        assert dispatcher.link.conn is None, "given up: nothing left to close"
        monkeypatch.undo()
    finally:
        dispatcher.close()


def _watch_through_an_outage(conn, dispatcher, monkeypatch):
    """Start `dispatcher.watch` in a thread, then take its database away (connections refused) until
    monkeypatch.undo(); returns (the thread, how the watch ended: None or its error, once it has)."""
    ended = []

    def watch():
        try:
            dispatcher.watch(idle_seconds=0.1)
        except BaseException as error:  # noqa: BLE001 (the test reads it)
            ended.append(error)
        else:
            ended.append(None)
    watching = threading.Thread(target=watch, daemon=True)
    refused = []

    def down(target):
        refused.append(target)
        raise db.DatabaseUnavailable("connection refused (the test's outage)")  # what db.connect raises
    watching.start()
    monkeypatch.setattr(db, "connect", down)
    _rows(conn, f"SELECT pg_terminate_backend({dispatcher.link.conn.get_backend_pid()}) AS count")
    assert wait_for(lambda: len(refused) >= 2, 10)
    return watching, ended


def test_a_watch_waits_out_an_outage_longer_than_its_leases_then_delivers(conn, receiver, settings, monkeypatch):
    # A pass gives up on the database when its leases would run out (test_delivery_faults.py); a watch has no
    # next pass to leave the work to, so it waits for the database for as long as it runs.
    dispatcher = Dispatcher(dataclasses.replace(settings, lease=timedelta(seconds=1)),
                            sender=settings.make_sender(resolver))
    try:
        watching, ended = _watch_through_an_outage(conn, dispatcher, monkeypatch)
        time.sleep(2.5)  # more than twice the lease
        assert watching.is_alive() and ended == []
        monkeypatch.undo()
        _events(conn, receiver.url("/ok", host="127.0.0.1"), 1)
        assert wait_for(lambda: len(receiver.requests) == 1, 20)
        dispatcher.stop()
        watching.join(10)
        assert not watching.is_alive() and ended == [None]
    finally:
        monkeypatch.undo()
        dispatcher.close()


def test_a_watch_told_to_stop_during_an_outage_ends_at_once_when_it_holds_nothing(conn, settings, monkeypatch):
    # With requests in flight or outcomes unrecorded it would wait up to its leases to record them; with
    # nothing held there is nothing to wait for (a stopped demo or service manager is not kept waiting).
    dispatcher = Dispatcher(dataclasses.replace(settings, lease=timedelta(seconds=60)))
    try:
        watching, ended = _watch_through_an_outage(conn, dispatcher, monkeypatch)
        stopped = time.monotonic()
        dispatcher.stop()
        watching.join(10)
        assert not watching.is_alive() and time.monotonic() - stopped < 6   # one backoff at most, not 60 s
        assert [type(error) for error in ended] == [DatabaseUnavailable]
    finally:
        monkeypatch.undo()
        dispatcher.close()


def test_a_lost_connection_is_tried_again_at_least_every_second_with_jitter(settings, monkeypatch):
    # The cap bounds how late the process is back after its database is (a standby promoted): a second.
    link = Link(settings.target)
    tries, slept, real_connect = [], [], db.connect

    def refused_eight_times(target):
        tries.append(target)
        if len(tries) <= 8:
            raise db.DatabaseUnavailable("connection refused (the test's outage)")
        return real_connect(target)
    monkeypatch.setattr(db, "connect", refused_eight_times)
    monkeypatch.setattr(connection.time, "sleep", slept.append)
    try:
        link.reconnect(db.DatabaseLost("server closed the connection unexpectedly"), None)
    finally:
        monkeypatch.undo()
        link.close()
    assert len(tries) == 9 and len(slept) == 8
    caps = [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0]
    assert all(cap / 2 <= wait <= cap for wait, cap in zip(slept, caps)), slept
    assert len(set(slept[4:])) == 4, "jittered: many processes do not all try at once"


def test_a_watch_listens_again_as_soon_as_its_connection_is_made_again(conn, settings, monkeypatch, caplog):
    # The listening connection is found lost first (the loop waits on its socket) and waits
    # LISTEN_RETRY_FIRST_SECONDS (5 s) before trying again; the link's connection made again says the
    # database is back, and listening is tried at once.
    caplog.set_level(logging.INFO, "delivery")
    dispatcher = Dispatcher(settings)
    sessions = ("SELECT {} FROM pg_stat_activity WHERE datname = current_database() "
                "AND query = 'LISTEN webhook_events' AND application_name = 'shiptrack-delivery'")
    watching = threading.Thread(target=dispatcher.watch, kwargs={"idle_seconds": 0.1}, daemon=True)
    refused = []

    def down(target):
        refused.append(target)
        raise db.DatabaseUnavailable("connection refused (the test's outage)")  # what db.connect raises
    try:
        watching.start()
        assert wait_for(lambda: _count(conn, sessions.format("count(*)")) == 1, 10)
        monkeypatch.setattr(db, "connect", down)
        _rows(conn, sessions.format("pg_terminate_backend(pid)"))
        assert wait_for(lambda: len(refused) == 1, 10), "the listener tried once, and waits"
        _rows(conn, f"SELECT pg_terminate_backend({dispatcher.link.conn.get_backend_pid()})")
        assert wait_for(lambda: len(refused) >= 3, 10), "the link tries again and again"
        monkeypatch.undo()
        assert wait_for(lambda: "database connection restored" in caplog.text, 5)
        assert wait_for(lambda: _count(conn, sessions.format("count(*)")) == 1, 2.5), "listening again before 5 s"
        dispatcher.stop()
        watching.join(10)
        assert not watching.is_alive()
    finally:
        monkeypatch.undo()
        dispatcher.close()
