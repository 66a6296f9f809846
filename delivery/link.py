"""The delivery process's one database connection, made again with backoff whenever it is lost.

Its state has a name (LinkState), and so does how long a loss is waited out (a Patience):
every service runs its turns through `Link.run`, which answers the turn's value or RECONNECTED.
"""
import enum
import logging
import random
import time

import psycopg2

from models import db

log = logging.getLogger("delivery")

# Reconnecting after a lost connection: the first try at once, then waits doubling up to the cap.
RECONNECT_FIRST_SECONDS = 0.1
RECONNECT_MAX_SECONDS = 5.0

DatabaseUnavailable = db.DatabaseUnavailable


def connection_lost(error, conn=None):
    """True when a database error means the connection is gone or not answering (models.db.classify).

    A setup error (credentials, database, a pooler's configuration) raises DatabaseSetupError: waiting
    does not fix it. A failed statement (a deadlock, a serialization failure, a bug) is False.
    """
    kind = db.classify(error, conn)
    if kind == db.SETUP:
        raise db.DatabaseSetupError(db.describe(error)) from error
    return kind in (db.LOST, db.TIMEOUT)


class LinkState(enum.Enum):
    """Where the connection stands."""

    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    UNAVAILABLE = "unavailable"  # gave up waiting: what is in memory is left to the leases


class Reconnected(enum.Enum):
    """What `Link.run` answers when the turn was cut by a lost connection that is now made again."""

    RECONNECTED = "reconnected"


RECONNECTED = Reconnected.RECONNECTED


class Patience:
    """How long a lost connection is waited for; `deadline()` is read when the loss is found (and while None)."""

    def deadline(self, link):
        """The monotonic time past which reconnecting gives up (DatabaseUnavailable), or None: never."""
        raise NotImplementedError


class AsLongAsLeases(Patience):
    """Outcomes in memory are worth keeping for as long as the leases last; then the work is sent again anyway."""

    def deadline(self, link):
        """The lease's length from now."""
        return time.monotonic() + link.lease_seconds


class Until(Patience):
    """Up to a fixed monotonic time (a pass's deadline)."""

    def __init__(self, at):
        self.at = at

    def deadline(self, link):
        """The fixed time."""
        return self.at


class WhileRunning(Patience):
    """For ever while the process runs (`--watch`); once it is stopping, as long as the leases last."""

    def __init__(self, stopping):
        self.stopping = stopping

    def deadline(self, link):
        """None while running, the lease's length from now once `stopping()`."""
        return AsLongAsLeases().deadline(link) if self.stopping() else None


class Link:
    """One autocommit connection (the claim is a transaction by itself; the rest use db.transaction)."""

    def __init__(self, target, lease_seconds, kept=lambda: (0, 0), on_reconnect=lambda: None):
        # kept(): (requests in flight, outcomes not recorded yet), for the log; on_reconnect(): after each.
        self.target, self.lease_seconds = target, lease_seconds
        self.kept, self.on_reconnect = kept, on_reconnect
        self.reconnects = 0
        self.conn = self._connect()
        self.state = LinkState.CONNECTED

    def _connect(self):
        try:
            conn = db.connect(self.target)
        except psycopg2.Error as error:
            connection_lost(error)  # raises on a setup error
            raise
        conn.autocommit = True
        return conn

    def run(self, turn, patience):
        """`turn()`'s value; RECONNECTED when a lost connection cut it and was made again (see reconnect)."""
        try:
            return turn()
        except (psycopg2.OperationalError, psycopg2.InterfaceError) as error:
            if not connection_lost(error, self.conn):
                raise
            self.reconnect(error, patience)
            return RECONNECTED

    def reconnect(self, error, patience):
        """Replace a lost connection, waiting with backoff; DatabaseUnavailable past the patience's deadline.

        A patience without a deadline is asked again at each try (a watcher told to stop meanwhile has one).
        """
        self.state = LinkState.RECONNECTING
        what = "not answering" if db.classify(error) == db.TIMEOUT else "connection lost"
        log.warning("database %s, reconnecting; %s requests in flight and %s outcomes kept error=%r",
                    what, *self.kept(), str(error).strip())
        try:
            self.conn.close()
        except psycopg2.Error:
            pass
        wait, deadline = RECONNECT_FIRST_SECONDS, patience.deadline(self)
        while True:
            try:
                self.conn = self._connect()
            except psycopg2.OperationalError as failure:
                connection_lost(failure)  # raises on a setup error
                deadline = patience.deadline(self) if deadline is None else deadline
                if deadline is not None and time.monotonic() + wait > deadline:
                    self.state = LinkState.UNAVAILABLE
                    raise DatabaseUnavailable(str(failure).strip()) from None
                log.warning("database unreachable, retrying in %.1f s error=%r", wait, str(failure).strip())
                # Slept whole (not cut by a finishing request): its outcome needs the database this backs off from.
                time.sleep(wait * random.uniform(0.5, 1.0))  # jitter: many workers do not come back at once
                wait = min(RECONNECT_MAX_SECONDS, wait * 2)
                continue
            self.reconnects += 1
            self.state = LinkState.CONNECTED
            self.on_reconnect()
            log.info("database connection restored; recording %s outcomes kept", self.kept()[1])
            return

    def close(self):
        """Close the connection."""
        self.conn.close()
