"""Reads from hot standbys: whether a process sends a read to its standby now, from lags measured every second.

A process with DATABASE_REPLICA_URL keeps one thread (`Standbys`) that, every CHECK_SECONDS, notes the
primary's WAL position (`pg_current_wal_lsn()`, with the time it was read) and asks each standby the URL
names how far it has replayed (`pg_last_wal_replay_lsn()`). A standby's lag is then the age of the latest
position of the primary it has replayed: it shows everything the primary had committed that long ago. An
idle primary writes no WAL, so a standby that has replayed it all is 0 behind however old its last
transaction is (what `now() - pg_last_xact_replay_timestamp()` gets wrong); one whose replication stopped
falls behind as soon as the primary writes. Reads go to a standby while its lag, measured at most
STALE_SECONDS ago, is at most the bound (DATABASE_REPLICA_LAG_SECONDS); otherwise (over it, or unknown) to
the primary. While the primary is away (its check failed, or a request could not reach it), reads go to
the standby whatever its lag: what it has is served rather than nothing. A lost standby sends them to
the primary until a check finds it answering again. Only a process's first reads wait, for its first
measurement (FIRST_WAIT_SECONDS at most), so that they do not all go to the primary meanwhile.
"""
import collections
import logging
import os
import threading
import time
from dataclasses import replace

import psycopg2
import psycopg2.extensions

from models import breaker, connections, deadline
from models.cursors import execute_one
from models.db_errors import DatabaseUnavailable

log = logging.getLogger(__name__)

CHECK_SECONDS = 1.0     # how often the lags are measured (one statement on the primary, one per standby)
STALE_SECONDS = 3.0     # a lag measured longer ago than this is unknown: reads go to the primary
KEPT_SECONDS = 120.0    # how long the primary's positions are kept (a lag is known up to this)
FIRST_WAIT_SECONDS = 1.0  # the longest a process's first reads wait for its first measurement
FIRST_CHECK_SECONDS = 0.05  # how often it measures until then
APPLICATION_NAME = "shiptrack-api-lag"  # the measuring connections', in pg_stat_activity

_PRIMARY_SQL = "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn AS position"
_STANDBY_SQL = ("SELECT pg_is_in_recovery() AS recovery, "
                "pg_last_wal_replay_lsn() - '0/0'::pg_lsn AS replayed")


class Behind(Exception):
    """The standby has not reached what a read asks for (a feed cursor it has not replayed): the primary answers."""


def hosts(url):
    """(host, port) of each server a libpq URL names, in order (a multi-host URL names several)."""
    params = psycopg2.extensions.parse_dsn(url)
    names = (params.get("host") or "localhost").split(",")
    ports = (params.get("port") or "5432").split(",")
    if len(ports) == 1:
        ports = ports * len(names)
    return list(zip(names, ports))


def host_url(url, host, port):
    """`url` naming one of its servers alone (as a keyword string), for measuring that one."""
    params = psycopg2.extensions.parse_dsn(url)
    params.update(host=host, port=port)
    for many in ("hostaddr", "load_balance_hosts", "target_session_attrs"):
        params.pop(many, None)
    return psycopg2.extensions.make_dsn(**params)


class Standbys:
    """The standbys of one process's reads (one per application), their lags, and where a read goes now."""

    def __init__(self, primary, standby, bound_seconds):
        self.primary, self.standby, self.bound = primary, standby, float(bound_seconds)
        self._positions = collections.deque()   # (monotonic time, the primary's WAL position then)
        self._lags = {}                         # (host, port) -> (lag in seconds or None, monotonic time measured)
        self._primary_away = False
        self._standby_lost_at = float("-inf")
        self._pid = None
        self._measured = threading.Event()      # set once this process has measured once
        self._lock = threading.Lock()

    def reads_there(self):
        """Whether a read goes to a standby now (starts measuring in this process on first use)."""
        self.start()
        if not self._measured.is_set():
            self._measured.wait(FIRST_WAIT_SECONDS)
        if breaker.is_open(standby=True) or time.monotonic() - self._standby_lost_at < CHECK_SECONDS:
            return False
        return self.primary_away() or any(self._fresh(key) for key in self._lags)

    def serves(self, conn):
        """Whether the standby `conn` is on may answer a read now (its own lag; any, while the primary is away)."""
        return self.primary_away() or self._fresh((conn.info.host, str(conn.info.port)))

    def primary_away(self):
        """Whether the primary is taken for away: its breaker is open, or its last check or a request failed."""
        return self._primary_away or breaker.is_open()

    def lost_primary(self):
        """A request could not reach the primary: reads go to a standby until a check finds the primary again."""
        self._primary_away = True

    def lost_standby(self):
        """A request lost its standby connection: reads go to the primary until a check finds it again."""
        self._standby_lost_at = time.monotonic()
        self._lags.clear()

    def lag(self, key):
        """The last lag measured of the standby at (host, port), in seconds; None when unknown."""
        return self._lags.get(key, (None, 0.0))[0]

    def _fresh(self, key):
        lag, measured_at = self._lags.get(key, (None, float("-inf")))
        return lag is not None and lag <= self.bound and time.monotonic() - measured_at <= STALE_SECONDS

    def start(self):
        """Start measuring in this process (its thread), unless it does already."""
        if self._pid == os.getpid():
            return
        with self._lock:
            if self._pid == os.getpid():
                return
            self._measured = threading.Event()   # before _pid: other threads wait on this one
            self._pid = os.getpid()
            self._positions.clear()
            self._lags, self._primary_away = {}, False
            threading.Thread(target=self._run, name="shiptrack-standby-lag", daemon=True).start()

    def _run(self):
        deadline.aside()  # the requests' breakers are theirs: these checks neither open nor close them
        conns, started = {}, time.monotonic()
        try:
            while self._pid == os.getpid():
                self.check(conns)
                # A first check finds no lag while the primary writes: no position of it was noted before the
                # standby's replay was read. Checked again at once, the first reads wait less.
                if (any(lag is not None for lag, _at in list(self._lags.values()))
                        or time.monotonic() - started >= FIRST_WAIT_SECONDS):
                    self._measured.set()
                time.sleep(CHECK_SECONDS if self._measured.is_set() else FIRST_CHECK_SECONDS)
        finally:
            for conn in conns.values():
                conn.close()

    def check(self, conns):
        """One measurement: the primary's position, then each standby's replay; `conns` keeps their connections."""
        now = time.monotonic()
        position = self._ask(conns, "primary", self.primary, _PRIMARY_SQL)
        if position is not None:
            self._positions.append((now, int(position["position"])))
            while self._positions and now - self._positions[0][0] > KEPT_SECONDS:
                self._positions.popleft()
        if self._primary_away != (position is None):
            log.warning("the primary %s: reads go to %s", "answers again" if position is not None else
                        "does not answer", "the standby within its lag bound" if position is not None else
                        "the standby whatever its lag")
        self._primary_away = position is None
        for host, port in hosts(self.standby.url):
            target = replace(self.standby, url=host_url(self.standby.url, host, port))
            answer = self._ask(conns, (host, port), target, _STANDBY_SQL)
            lag = None
            if answer is not None and answer["recovery"]:
                lag = self._lag_of(int(answer["replayed"]), time.monotonic())
            was = self._fresh((host, port))
            self._lags[host, port] = (lag, time.monotonic())
            if was != self._fresh((host, port)):
                log.warning("the standby %s:%s %s", host, port,
                            "serves reads" if not was else
                            f"is past the lag bound ({lag:.1f} s over {self.bound:g} s): its reads go to the primary"
                            if lag is not None else "lag is unknown: its reads go to the primary")

    def _lag_of(self, replayed, now):
        # The age of the latest position of the primary's that the standby has replayed; None (unknown) when it
        # has replayed none of those kept, or the primary was never read: it may be any older.
        for at, position in reversed(self._positions):
            if position <= replayed:
                return now - at
        return None

    def _ask(self, conns, key, target, sql):
        """The row `sql` answers on `key`'s own connection (made again when lost); None when it cannot."""
        try:
            conn = conns.get(key)
            if conn is None or conn.closed:
                conn = conns[key] = connections.connect(replace(target, application_name=APPLICATION_NAME,
                                                                pool_size=1))
                conn.autocommit = True
            with deadline.within(CHECK_SECONDS * 2):
                return execute_one(conn, sql)
        except (DatabaseUnavailable, psycopg2.Error):
            dropped = conns.pop(key, None)
            if dropped is not None:
                dropped.close()
            return None
