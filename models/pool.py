"""A process's pool of connections to one target, and the checkout and checkin of the API's requests.

The pool is made after fork, so workers never share sockets. A checkout lends a connection that looks
alive, or none at once while the database is taken for not answering (models/breaker.py).
"""
import collections
import os
import select
import threading
import time

import psycopg2
import psycopg2.extensions

from models import breaker, deadline
from models.connections import Target, connect, say_once
from models.db_errors import (DatabaseSetupError, DatabaseTimeout, DatabaseUnavailable, InterfaceError, PoolError,
                              unavailable)

# How long a checkout waits for a lent connection to come back when a new one cannot be made, for a
# target without a connect timeout (one with waits that long).
LENT_WAIT_SECONDS = 5.0
# After a new connection failed while the process held others, how long its requests share those before the
# pool tries to make one again: a full pooler, or a database too slow to connect to, stays so for a while.
REGROW_SECONDS = 30.0


class Pool:
    """Up to `target.pool_size` connections of one process to one target; idle ones are reused last-in first.

    A database that answers slowly may take longer to make a connection than connect_timeout allows, and
    a pooler smaller than the processes' pools together gives a new one none, while the connections the
    process has still answer: a request that cannot get a new one waits for one of those to come back
    rather than fail, and the pool makes no new one for REGROW_SECONDS after (said once in the log).
    While one connection is being made the others wait for a lent one instead of making more (one slow
    connect at a time, not one per request).
    """

    def __init__(self, target):
        self.target, self.closed = target, False
        self._idle, self._open, self._making = [], 0, 0
        self._regrow_at = float("-inf")  # monotonic time before which no connection is made while others are open
        self._waiting = collections.deque()  # one [connection or None] per thread waiting, first come first
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a connection came back, or a connect ended

    def get(self, wait_seconds=0):
        """An idle connection, else a new one, else one lent now once it comes back within `wait_seconds`.

        DatabaseTimeout when none comes back in time, the connect's DatabaseUnavailable when a new one
        cannot be made and none is lent to wait for, PoolError once the pool is closed.
        """
        failed = None
        while True:
            conn = self._lent_back_or_turn(wait_seconds, failed)
            if conn is not None:
                return conn
            try:
                conn = connect(self.target)
            except BaseException as error:
                self._made(None)
                if not isinstance(error, DatabaseUnavailable) or isinstance(error, DatabaseSetupError):
                    raise
                failed = error
                self._refused(error)
                continue
            self._made(conn)
            return conn

    def _refused(self, error):
        # A new connection failed while the process holds others: wait for those for a while, and say why once.
        with self._changed:
            holding = self._open
            if not holding:
                return
            self._regrow_at = time.monotonic() + REGROW_SECONDS
        say_once("smaller", "a new database connection could not be made while this process holds %s (%s): its "
                            "requests wait for those, and it tries again every %s s; the database, or a pooler "
                            "between, gives this process fewer than SHIPTRACK_DATABASE_POOL_SIZE (%s) connections (a "
                            "pooler's pool must hold the pools of every process behind it: docs/scaling.md)",
                            holding, error, REGROW_SECONDS, self.target.pool_size)

    def _lent_back_or_turn(self, wait_seconds, failed):
        # An idle connection; else None when this thread is to make one (counted as open); else, waiting
        # up to wait_seconds for either, what ends the wait. After `failed` (a connect that failed) only
        # a lent one will do. Waiters are served in turn: put() hands a connection to the first in line.
        until, turn = time.monotonic() + wait_seconds, None
        with self._changed:
            try:
                while True:
                    if self.closed:
                        raise PoolError("connection pool is closed")
                    if turn and turn[0] is not None:
                        return turn[0]
                    if self._idle:
                        return self._idle.pop()
                    lent = self._open - len(self._idle) - self._making
                    may_make = (failed is None and self._open < self.target.pool_size
                                and (self._making == 0 or lent == 0)
                                and (self._open == 0 or time.monotonic() >= self._regrow_at))
                    if may_make:
                        self._open += 1
                        self._making += 1
                        return None
                    remaining = until - time.monotonic()
                    if failed is not None and lent + self._making == 0:
                        raise failed  # nothing of this process's that could come back
                    if remaining <= 0:
                        raise failed or DatabaseTimeout(f"none of the {self.target.pool_size} connections of the "
                                                        f"pool came back within {wait_seconds:g} s")
                    if turn is None:
                        turn = [None]
                        self._waiting.append(turn)
                    self._changed.wait(remaining)
            finally:
                if turn is not None and turn[0] is None:  # still in line: leave it, found by identity (all are [None])
                    del self._waiting[next(i for i, waiting in enumerate(self._waiting) if waiting is turn)]

    def _made(self, conn):
        with self._changed:
            self._making -= 1
            if conn is None:
                self._open -= 1
            self._changed.notify_all()
        if conn is not None:
            conn.pool = self

    def put(self, conn, close=False):
        """Take a connection back, to the first thread waiting for one; a broken one, or any once closed, is closed."""
        with self._changed:
            keep = not (close or conn.closed or self.closed)
            if keep and self._waiting:
                self._waiting.popleft()[0] = conn
            elif keep:
                self._idle.append(conn)
            else:
                self._open -= 1
            self._changed.notify_all()
        if not keep:
            conn.close()

    def close(self):
        """Close the idle connections now and each lent one when it comes back."""
        with self._lock:
            self.closed, idle, self._idle = True, self._idle, []
            self._open -= len(idle)
        for conn in idle:
            conn.close()


_pools = {}  # the process's pools, by whether their target is a standby: {standby: (pool, pid)}
_pool_lock = threading.Lock()


def get_pool(target):
    """The process's pool for `target`, made after fork so workers never share sockets.

    One pool per role (the primary's, a standby's: models/standby.py). A pool for another target of the
    same role (tests switch databases) replaces it, and the old one is closed.
    """
    target = as_target(target)
    with _pool_lock:
        pool, pid = _pools.get(target.standby, (None, None))
        if pool is None or pid != os.getpid() or pool.target != target:
            if pool is not None and pid == os.getpid():
                pool.close()
            pool = Pool(target)
            _pools[target.standby] = (pool, os.getpid())
        return pool


def close_pool():
    """Close every pooled connection (tests switch databases)."""
    with _pool_lock:
        for pool, pid in _pools.values():
            if pid == os.getpid():
                pool.close()
        _pools.clear()


def as_target(target):
    """A Target; a bare URL means a process pool's own target when it has that URL, else the defaults."""
    if isinstance(target, Target):
        return target
    for pool, _pid in list(_pools.values()):
        if pool.target.url == target:
            return pool.target
    return Target(target)


def looks_alive(conn):
    """Whether an idle pooled connection still looks usable, without a round trip.

    An idle connection has nothing to read: when the server ends the session (pg_terminate_backend,
    a restart, a failover, a proxy closing) it sends a FATAL message and closes, which makes the
    socket readable. A poll of the socket is what a `SELECT 1` pre-ping would learn, for free; a
    connection that dies after the check is caught by the caller's retry (api.context.first_statements).
    """
    if conn.closed:
        return False
    poller = select.poll()
    try:
        poller.register(conn.fileno(), select.POLLIN)
    except (OSError, ValueError, InterfaceError):
        return False
    return not poller.poll(0)


def checkout(target):
    """A connection from the process's pool that looks alive; dead ones are closed and dropped from the pool.

    Raises DatabaseUnavailable when a new connection cannot be made (DatabaseSetupError when it never
    will), and at once while the database is taken for not answering (models/breaker.py), unless this
    checkout is the one that finds out whether it answers again.
    """
    target = as_target(target)
    if breaker.admit(target.standby):
        return _probe(get_pool(target))
    return _take(get_pool(target))


def _take(pool):
    # The pool keeps few idle connections; every one may have died in the same outage. A new one that
    # cannot be made raises DatabaseUnavailable (connect), unless one of the process's comes back
    # meanwhile: as long as a connect may take, it is what the request would have waited anyway.
    for _attempt in range(pool.target.pool_size + 1):
        conn = pool.get(wait_seconds=pool.target.connect_timeout or LENT_WAIT_SECONDS)
        if looks_alive(conn):
            return conn
        pool.put(conn, close=True)
    raise DatabaseUnavailable("every pooled connection was dead")


def _probe(pool):
    # The breaker's probe: one statement (a pooler answers a connection by itself) on a connection of the
    # pool's (an idle one that looks alive, else a new one), all within the connect timeout. Its outcome
    # closes the breaker or keeps it open, whatever happens. Idle connections are kept: on a database
    # that answers slowly they are the ones that still answer.
    answered, reason, started = False, "", time.monotonic()
    try:
        with deadline.within(pool.target.connect_timeout or None):
            conn = _take(pool)
            try:
                autocommit, conn.autocommit = conn.autocommit, True  # one round trip: no BEGIN
                with conn.cursor(cursor_factory=psycopg2.extensions.cursor) as cur:  # the driver's own
                    cur.execute("SELECT 1")
                conn.autocommit = autocommit
            except (DatabaseUnavailable, psycopg2.Error) as error:  # any failure here is the database away
                pool.put(conn, close=True)
                if isinstance(error, DatabaseUnavailable):
                    raise  # the connection's setters and cursor() raise the project's own
                raise unavailable(error) from error  # the driver's own cursor, a statement's error too
        answered = True
        return conn
    except DatabaseUnavailable as error:
        reason = str(error)
        raise
    finally:
        breaker.probed(answered, reason, since=started, standby=pool.target.standby)


def checkin(conn, broken=False):
    """Give a connection back to its pool; a broken or closed one is closed and dropped."""
    pool = getattr(conn, "pool", None)
    if pool is None:
        conn.close()
    else:
        pool.put(conn, close=broken or bool(conn.closed))
