"""Delivery under faults: killed passes, lost connections, overlapping processes, failed renders.

What must hold: no event is lost; an attempt is sent again only when its request was in flight
when its pass died, and every such attempt is visible in the attempt log (`in_flight`, then
`interrupted`); the per-endpoint cap holds across processes; a render failure is never silent.
"""
import dataclasses
import logging
import signal
import socket
import time
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest

from delivery import outbox
from delivery.outbox import render_pending
from delivery.worker import DatabaseUnavailable, Dispatcher
from models import db, webhook_deliveries, webhooks
from tests.support.claims import lock_claimable
from tests.support.factories import make_org, make_shipment
from tests.support.processes import wait_for
from tests.support.webhooks import Clock, add_endpoint, pass_process, resolver, run_pass

CAP = 4


def _changes(conn, url, count):
    """An endpoint at `url` and `count` shipment.status_changed events; returns the endpoint."""
    org = make_org(conn, "acme")
    endpoint = add_endpoint(conn, org, url)
    with conn.cursor() as cur:
        cur.execute("INSERT INTO shipments (organization_id) SELECT %s FROM generate_series(1, %s)", (org, count))
        cur.execute("UPDATE shipments SET status = 'in_transit'")
    return endpoint


def _rows(conn, sql, *args):
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


def _log(conn):
    """Each event's attempts in the operators' view: {event: [status, ...]} in attempt order."""
    found = {}
    for row in _rows(conn, "SELECT event, status FROM webhook_attempt_log ORDER BY attempt_id"):
        found.setdefault(row["event"], []).append(row["status"])
    return found


def _deliveries(conn):
    return _rows(conn, "SELECT state, attempt_count, count(*) FROM webhook_deliveries GROUP BY 1, 2 ORDER BY 1, 2")


def _received(receiver):
    return Counter(request["headers"]["webhook-id"] for request in receiver.requests)


def _named(url, name):
    return f"{url}{'&' if '?' in url else '?'}application_name={name}"


def _kill(process):
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    process.stdout.close()


def _lease_expiry(conn):
    return _rows(conn, "SELECT max(next_attempt_at) AS until FROM webhook_deliveries")[0]["until"]


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["claimed_not_sent", "request_in_flight", "answered_not_recorded"])
def test_kill_9_of_a_pass_loses_nothing_and_resends_only_what_was_in_flight(
        conn, database_url, receiver, ca_bundle, settings, moment):
    count = 3
    silent = socket.socket()  # accepts connections (the kernel does) and never answers the TLS handshake
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    url = {"claimed_not_sent": f"https://127.0.0.1:{silent.getsockname()[1]}/",
           "request_in_flight": receiver.url("/sleep/20", host="127.0.0.1"),
           "answered_not_recorded": receiver.url("/sleep/1", host="127.0.0.1")}[moment]
    endpoint = _changes(conn, url, count)
    blocker = db.connect(database_url)
    process = pass_process(_named(database_url, "st-killed"), ca_bundle, "--seconds", "30")
    try:
        # The claim writes the attempt rows in flight before any request goes out.
        assert wait_for(lambda: len(_rows(conn, "SELECT 1 FROM webhook_attempts WHERE state = 'in_flight'"))
                        == count, 15)
        if moment == "request_in_flight":
            assert wait_for(lambda: len(receiver.requests) == count, 10)
        if moment == "answered_not_recorded":
            # Hold the deliveries so that recording their outcomes waits; kill the pass while it waits.
            _rows(blocker, "SELECT id FROM webhook_deliveries FOR UPDATE")
            assert wait_for(lambda: _rows(conn, "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                                                "'st-killed' AND wait_event_type = 'Lock'")[0]["count"] == 1, 10)
            assert len(receiver.requests) == count
        else:
            time.sleep(0.5)
    finally:
        _kill(process)
        blocker.rollback()
        blocker.close()
        silent.close()
    sent_before = len(receiver.requests)
    assert sent_before == (0 if moment == "claimed_not_sent" else count)
    # The dead pass left a trace: every attempt it had started is in the log, in flight.
    assert _log(conn) == {f"msg_{n}": ["in_flight"] for n in range(1, count + 1)}
    assert _deliveries(conn) == [{"state": "pending", "attempt_count": 0, "count": count}]

    with conn.cursor() as cur:
        cur.execute("UPDATE webhook_endpoints SET url = %s WHERE id = %s",
                    (receiver.url("/ok", host="127.0.0.1"), endpoint["id"]))
    receiver.force_status = 200
    run_pass(settings, Clock(_lease_expiry(conn) + timedelta(seconds=1)))

    # Nothing lost; the attempt each dead request stood for is closed as interrupted and made again.
    assert _deliveries(conn) == [{"state": "succeeded", "attempt_count": 1, "count": count}]
    assert _log(conn) == {f"msg_{n}": ["interrupted", "succeeded"] for n in range(1, count + 1)}
    received = _received(receiver)
    assert set(received) == {f"msg_{n}" for n in range(1, count + 1)}
    duplicates = sum(received.values()) - count
    assert duplicates == sent_before, "a duplicate only for a request that was in flight when the pass died"


@pytest.mark.slow
def test_terminated_connections_under_watch_are_survived_without_duplicates(conn, database_url, receiver,
                                                                            ca_bundle):
    count = 12
    _changes(conn, receiver.url("/sleep/1", host="127.0.0.1"), count)
    process = pass_process(_named(database_url, "st-watch"), ca_bundle, "--watch", WEBHOOK_PER_ENDPOINT=CAP)
    terminated = 0
    try:
        assert wait_for(lambda: len(receiver.requests) >= CAP, 15)
        for _ in range(3):  # while requests are in flight, twice more as they finish and the next wave starts
            terminated += len(_rows(conn, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                          "WHERE application_name = 'st-watch'"))
            time.sleep(0.7)
        assert wait_for(lambda: _deliveries(conn) == [{"state": "succeeded", "attempt_count": 1, "count": count}],
                        20), _deliveries(conn)
        assert process.poll() is None, "the watcher is still running"
    finally:
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=30)[0].decode()
    assert process.returncode == 0, output
    assert terminated >= 3
    assert "database connection lost, reconnecting" in output and "database connection restored" in output
    assert _received(receiver) == {f"msg_{n}": 1 for n in range(1, count + 1)}, "no duplicate for a blip"
    assert _log(conn) == {f"msg_{n}": ["succeeded"] for n in range(1, count + 1)}


@pytest.mark.slow
def test_two_passes_and_a_watcher_respect_the_cap_of_one_slow_endpoint(conn, database_url, receiver, ca_bundle):
    count = 24
    _changes(conn, receiver.url("/sleep/0.5", host="127.0.0.1"), count)
    processes = [pass_process(database_url, ca_bundle, "--watch", WEBHOOK_PER_ENDPOINT=CAP),
                 pass_process(database_url, ca_bundle, "--seconds", "8", WEBHOOK_PER_ENDPOINT=CAP),
                 pass_process(database_url, ca_bundle, "--seconds", "8", WEBHOOK_PER_ENDPOINT=CAP)]
    try:
        assert wait_for(lambda: _deliveries(conn) == [{"state": "succeeded", "attempt_count": 1, "count": count}],
                        20), _deliveries(conn)
    finally:
        processes[0].send_signal(signal.SIGTERM)
        outputs = [process.communicate(timeout=30)[0].decode() for process in processes]
    assert [process.returncode for process in processes] == [0, 0, 0], outputs
    assert _received(receiver) == {f"msg_{n}": 1 for n in range(1, count + 1)}, "each attempt once"
    assert receiver.most_active == CAP, "the cap holds across processes, and is used"
    assert _log(conn) == {f"msg_{n}": ["succeeded"] for n in range(1, count + 1)}


def test_the_cap_counts_every_process_leases(conn, settings):
    """Claims from two connections (two processes) together lease at most the cap of one endpoint."""
    _changes(conn, "https://hooks.example/in", CAP + 2)
    first, second = db.connect(settings.database_url), db.connect(settings.database_url)
    try:
        with first:
            render_pending(first, datetime.now(timezone.utc))
        now = datetime.now(timezone.utc)
        lease = now + timedelta(minutes=5)
        with first:
            assert len(webhook_deliveries.claim_due(first, now, lease, "0" * 32, CAP, 100)) == CAP
        with second:
            assert webhook_deliveries.claim_due(second, now, lease, "1" * 32, CAP, 100) == []
        # A claim in progress holds the endpoint: another skips it rather than counting past the cap.
        with first, second:
            assert lock_claimable(first, lease + timedelta(seconds=1), 100) != []
            assert webhook_deliveries.claim_due(second, lease + timedelta(seconds=1), lease, "1" * 32, CAP, 100) == []
        # Leases of a dead process stop counting when they run out.
        with second:
            later = lease + timedelta(seconds=1)
            claimed = webhook_deliveries.claim_due(second, later, later + timedelta(minutes=5), "1" * 32, CAP, 100)
            assert len(claimed) == CAP  # the 2 never claimed first (earliest due), then 2 of the dead ones
    finally:
        first.close()
        second.close()
    assert Counter(row["status"] for row in _rows(conn, "SELECT status FROM webhook_attempt_log")) == {
        "interrupted": 2, "in_flight": CAP + 2}


def _holders(conn):
    """The lease holders whose lock a session of this database holds: {holder: pid}."""
    return {row["objid"]: row["pid"] for row in _rows(
        conn, "SELECT objid::int, pid FROM pg_locks WHERE locktype = 'advisory' AND classid = %s AND objsubid = 2 "
              "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        webhook_deliveries.HOLDER_LOCK_SPACE)}


def test_only_leases_whose_holder_is_gone_are_freed(conn, settings):
    _changes(conn, "https://hooks.example/in", 6)
    alive, dead, holderless = (db.connect(settings.database_url) for _ in range(3))
    try:
        with alive:
            render_pending(alive, datetime.now(timezone.utc))
        now = datetime.now(timezone.utc)
        lease = now + timedelta(minutes=5)
        alive.autocommit = dead.autocommit = True
        (first, held), (second, _held) = webhook_deliveries.hold(alive), webhook_deliveries.hold(dead)
        assert held and first != second and _holders(conn) == {first: alive.get_backend_pid(),
                                                              second: dead.get_backend_pid()}
        assert webhook_deliveries.hold(alive, first) == (first, True), "taken again on its session: still held"
        for claimer, holder in ((alive, first), (dead, second), (holderless, None)):
            with claimer:
                assert len(webhook_deliveries.claim_due(claimer, now, lease, "0" * 32, 6, 2, holder)) == 2
        assert webhook_deliveries.free_orphaned(conn, now) == 0
        dead.close()  # the process is killed: its session, and so its lock, are gone
        assert wait_for(lambda: _holders(conn) == {first: alive.get_backend_pid()}, 5)
        assert webhook_deliveries.free_orphaned(conn, now) == 2, "only the dead holder's"
        assert webhook_deliveries.free_orphaned(conn, now) == 0
        assert _rows(conn, "SELECT lease_holder, next_attempt_at = %s AS due, lease_token IS NOT NULL AS leased "
                           "FROM webhook_deliveries ORDER BY id", now) == [
            {"lease_holder": first, "due": False, "leased": True}] * 2 + [
            {"lease_holder": second, "due": True, "leased": True}] * 2 + [
            {"lease_holder": None, "due": False, "leased": True}] * 2
        # A process frees no lease of its own, whatever pg_locks says of it.
        assert webhook_deliveries.free_orphaned(conn, now, first) == 0
        # The freed deliveries are claimed again at once, their dead attempts closed as interrupted.
        with alive:
            again = webhook_deliveries.claim_due(alive, now, lease, "1" * 32, 6, 100, first)
        assert [delivery.id for delivery in again] == [3, 4]
    finally:
        for connection in (alive, dead, holderless):
            connection.close()
    assert Counter(row["status"] for row in _rows(conn, "SELECT status FROM webhook_attempt_log")) == {
        "interrupted": 2, "in_flight": 6}


def test_a_reconnected_process_holds_its_leases_again(conn, receiver, settings):
    _changes(conn, receiver.url("/sleep/2", host="127.0.0.1"), 3)
    dispatcher = Dispatcher(settings, sender=settings.make_sender(resolver))
    try:
        dispatcher.render()
        assert dispatcher.record_and_claim() == 3
        (holder,) = {row["lease_holder"] for row in _rows(conn, "SELECT lease_holder FROM webhook_deliveries")}
        assert _holders(conn) == {holder: dispatcher.link.conn.get_backend_pid()}
        _rows(conn, "SELECT pg_terminate_backend(%s)", dispatcher.link.conn.get_backend_pid())
        assert wait_for(lambda: _holders(conn) == {}, 5), "the lock went with the session"
        assert dispatcher.link.run(dispatcher.record_and_claim, None) is None, "lost, reconnected"
        assert dispatcher.link.run(dispatcher.record_and_claim, None) == 0
        assert _holders(conn) == {holder: dispatcher.link.conn.get_backend_pid()}, "the same key, on the new session"
        assert webhook_deliveries.free_orphaned(conn, datetime.now(timezone.utc)) == 0
        assert wait_for(lambda: dispatcher.results.qsize() == 3, 10)
        assert dispatcher.link.run(dispatcher.record_and_claim, None) == 3
    finally:
        dispatcher.close()
    assert wait_for(lambda: _holders(conn) == {}, 5), "released when the process ends"
    assert _log(conn) == {f"msg_{n}": ["succeeded"] for n in range(1, 4)}
    assert len(receiver.requests) == 3


def test_through_a_transaction_pooler_leases_name_no_holder(conn, receiver, settings):
    _changes(conn, receiver.url("/ok", host="127.0.0.1"), 2)
    pooled = dataclasses.replace(settings, database={**settings.database, "DATABASE_POOLER": "transaction"})
    dispatcher = Dispatcher(pooled, sender=settings.make_sender(resolver))
    try:
        dispatcher.render()
        assert dispatcher.record_and_claim() == 2
        assert _rows(conn, "SELECT DISTINCT lease_holder FROM webhook_deliveries") == [{"lease_holder": None}]
        assert _holders(conn) == {}
    finally:
        dispatcher.close()
    assert _log(conn) == {"msg_1": ["succeeded"], "msg_2": ["succeeded"]}


def test_outcomes_finished_while_the_connection_is_lost_are_recorded_after_reconnecting(conn, receiver, settings,
                                                                                      caplog):
    _changes(conn, receiver.url("/ok", host="127.0.0.1"), 3)
    caplog.set_level(logging.INFO, "delivery")
    dispatcher = Dispatcher(settings, sender=settings.make_sender(resolver))
    try:
        dispatcher.render()
        dispatcher.record_and_claim()
        assert _log(conn) == {f"msg_{n}": ["in_flight"] for n in range(1, 4)}
        assert wait_for(lambda: len(receiver.requests) == 3, 10)
        _rows(conn, "SELECT pg_terminate_backend(%s)", dispatcher.link.conn.get_backend_pid())
        assert wait_for(lambda: dispatcher.results.qsize() == 3, 10)
        assert dispatcher.link.run(dispatcher.record_and_claim, None) is None, "lost, reconnected"
        restored = [r.getMessage() for r in caplog.records if "connection restored" in r.getMessage()]
        where = f"host={conn.info.host} port={conn.info.port}"
        assert restored == [f"database connection restored; recording 3 outcomes kept {where}"]
        assert _log(conn) == {f"msg_{n}": ["in_flight"] for n in range(1, 4)}, "not recorded yet"
        assert dispatcher.link.run(dispatcher.record_and_claim, None) == 3
        assert _log(conn) == {f"msg_{n}": ["succeeded"] for n in range(1, 4)}
    finally:
        dispatcher.close()
    assert _deliveries(conn) == [{"state": "succeeded", "attempt_count": 1, "count": 3}]
    assert _log(conn) == {f"msg_{n}": ["succeeded"] for n in range(1, 4)}
    assert len(receiver.requests) == 3


def test_an_outage_is_waited_out_with_backoff_and_what_finished_is_recorded(conn, receiver, settings, monkeypatch):
    _changes(conn, receiver.url("/ok", host="127.0.0.1"), 2)
    dispatcher = Dispatcher(settings, sender=settings.make_sender(resolver))
    refused = []
    real_connect = db.connect

    def down_for_a_while(url):
        if len(refused) < 4:  # 0.1 + 0.2 + 0.4 + 0.8 s of backoff (with jitter)
            refused.append(time.monotonic())
            raise db.DatabaseUnavailable("connection refused (the test's outage)")  # what db.connect raises
        return real_connect(url)
    try:
        dispatcher.render()
        dispatcher.record_and_claim()
        assert wait_for(lambda: dispatcher.results.qsize() == 2, 10)
        _rows(conn, "SELECT pg_terminate_backend(%s)", dispatcher.link.conn.get_backend_pid())
        monkeypatch.setattr(db, "connect", down_for_a_while)
        assert dispatcher.link.run(dispatcher.record_and_claim, None) is None
        assert len(refused) == 4 and refused[-1] - refused[0] > 0.35
        assert dispatcher.link.run(dispatcher.record_and_claim, None) == 2
    finally:
        dispatcher.close()
    assert _log(conn) == {"msg_1": ["succeeded"], "msg_2": ["succeeded"]}
    assert len(receiver.requests) == 2


def test_a_pass_gives_up_on_the_database_when_its_leases_would_run_out(conn, receiver, settings, monkeypatch,
                                                                       caplog):
    _changes(conn, receiver.url("/ok", host="127.0.0.1"), 1)
    dispatcher = Dispatcher(dataclasses.replace(settings, lease=timedelta(seconds=1)),
                            sender=settings.make_sender(resolver))
    try:
        dispatcher.render()
        dispatcher.record_and_claim()
        assert wait_for(lambda: dispatcher.results.qsize() == 1, 10)
        _rows(conn, "SELECT pg_terminate_backend(%s)", dispatcher.link.conn.get_backend_pid())

        def down(url):
            raise db.DatabaseUnavailable("connection refused (the test's outage)")  # what db.connect raises
        monkeypatch.setattr(db, "connect", down)
        started = time.monotonic()
        with pytest.raises(DatabaseUnavailable):
            dispatcher.run_pass(30)  # holding an outcome: it waits as long as the 1 s lease, not its 30 s
        assert time.monotonic() - started < 1.5
    finally:
        dispatcher.close()
    assert "1 outcomes not recorded" in caplog.text
    # The attempt stays visibly in flight; the lease brings the delivery back to the next pass.
    assert _log(conn) == {"msg_1": ["in_flight"]}


def test_rendered_bodies_are_committed_durably(conn, settings):
    """The loop's session skips the WAL flush, except for the transaction that stores rendered bodies."""
    _changes(conn, "https://hooks.example/in", 1)
    dispatcher = Dispatcher(settings)
    try:
        show = "SHOW synchronous_commit"
        assert _rows(dispatcher.link.conn, show)[0]["synchronous_commit"] == "off"
        dispatcher.link.conn.rollback()
        with dispatcher.link.conn:
            assert render_pending(dispatcher.link.conn, datetime.now(timezone.utc)) == 1
            assert _rows(dispatcher.link.conn, show)[0]["synchronous_commit"] == "on"
        assert _rows(dispatcher.link.conn, show)[0]["synchronous_commit"] == "off"
        dispatcher.link.conn.rollback()
    finally:
        dispatcher.close()


@pytest.fixture
def cli(database_url, ca_bundle):
    """Invoke `flask webhooks ...` against the test database; returns (exit code, output)."""
    from app import create_app

    app = create_app({"TESTING": True, "DATABASE_URL": database_url, "WEBHOOK_ALLOWED_NETWORKS": ["127.0.0.1/32"],
                      "WEBHOOK_CA_BUNDLE": ca_bundle})
    runner = app.test_cli_runner()

    def invoke(*args):
        result = runner.invoke(args=["webhooks", *args])
        return result.exit_code, result.output
    return invoke


def test_a_render_error_is_its_own_state_listed_and_retried_after_the_fix(conn, receiver, settings, cli,
                                                                         monkeypatch):
    org = make_org(conn, "acme")
    add_endpoint(conn, org, receiver.url("/ok"))
    hidden, shown = make_shipment(conn, org), make_shipment(conn, org)
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'in_transit' WHERE id IN (%s, %s)", (hidden, shown))
        cur.execute("UPDATE shipments SET awaiting_approval = true WHERE id = %s", (hidden,))

    def broken(self, organization_id, shipment_id, version):
        raise KeyError("eta_local")  # a serialiser bug shipped by a deploy
    monkeypatch.setattr(outbox.Renderer, "shipment", broken)
    run_pass(settings)
    states = {row["id"]: (row["state"], row["render_error"])
              for row in _rows(conn, "SELECT id, state, render_error FROM events")}
    assert states == {1: ("skipped", None), 2: ("render_failed", "KeyError: 'eta_local'")} or \
        states == {1: ("render_failed", "KeyError: 'eta_local'"), 2: ("render_failed", "KeyError: 'eta_local'")}
    assert receiver.requests == []
    failed = sorted(i for i, (state, _e) in states.items() if state == "render_failed")
    view = _rows(conn, "SELECT event, organization, type, subject, error FROM webhook_render_failures ORDER BY event")
    assert [row["event"] for row in view] == [f"msg_{i}" for i in failed]
    assert view[-1] == {"event": "msg_2", "organization": "acme", "type": "shipment.status_changed",
                        "subject": f"shp_{shown}", "error": "KeyError: 'eta_local'"}

    code, output = cli("render-failures")
    assert code == 0 and "msg_2" in output and "KeyError: 'eta_local'" in output, output
    code, output = cli("resend", "msg_2")
    assert code == 1 and "could not be rendered (KeyError: 'eta_local')" in output and "retry-render msg_2" in output
    code, output = cli("retry-render", "msg_2")
    assert code == 1 and "msg_2: still fails: KeyError: 'eta_local'" in output, output

    monkeypatch.undo()  # the fix is deployed
    code, output = cli("retry-render", "--all")
    assert code == 0, output
    assert "msg_2: rendered; the next delivery pass sends it" in output
    code, output = cli("render-failures")
    assert code == 0 and "msg_" not in output, output
    code, output = cli("retry-render", "msg_2")
    assert code == 1 and "msg_2 did not fail to render" in output
    run_pass(settings)
    assert [r["headers"]["webhook-id"] for r in receiver.requests] == ["msg_2"]
    assert _rows(conn, "SELECT state FROM events WHERE id = 2") == [{"state": "rendered"}]


def test_disabling_closes_attempts_a_dead_pass_left_in_flight(conn, settings):
    endpoint = _changes(conn, "https://hooks.example/in", 2)
    now = datetime.now(timezone.utc)
    claimer = db.connect(settings.database_url)
    try:
        with claimer:
            render_pending(claimer, now)
            webhook_deliveries.claim_due(claimer, now, now + timedelta(minutes=5), "0" * 32, CAP, 100)
    finally:
        claimer.close()  # the pass dies here
    with conn.cursor() as cur:
        cur.execute("UPDATE webhook_attempts SET attempted_at = attempted_at + interval '10 seconds' WHERE event_id = 2")
    assert webhooks.disable_endpoint(conn, endpoint["id"], now + timedelta(seconds=20), "test") == 2
    # Only an attempt older than the 15 s a request may last is surely dead; the other may still be recorded.
    assert _log(conn) == {"msg_1": ["interrupted"], "msg_2": ["in_flight"]}
