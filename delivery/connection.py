"""What the delivery loop waits on: its connection (made again with backoff), its LISTEN connection, its wake-up pipe.

A deadline is a monotonic time or None (for ever): how long a lost connection is waited for.
"""
import logging
import os
import random
import select
import time

from models import db

log = logging.getLogger("delivery")

# Reconnecting after a lost connection: the first try at once, then waits doubling up to the cap, each a
# random half to whole of it. The cap bounds how late the process is back once the database is (a standby
# promoted: docs/operations.md, "Failover"); each try against a database that refuses costs it one failed
# connection, so a process makes one or two a second while it is away (bench/failover.py).
RECONNECT_FIRST_SECONDS = 0.1
RECONNECT_MAX_SECONDS = 1.0
CHANNEL = "webhook_events"  # the outbox triggers NOTIFY it (schema.sql) when an event is written
# After a failed try, listening is tried again after this long, doubling up to the cap: a database that
# does not answer holds each try for the connect timeout, and meanwhile new events are found by polling.
# Once the link's connection is made again, listening is tried at once (Listener.retry_now).
LISTEN_RETRY_FIRST_SECONDS = 5.0
LISTEN_RETRY_MAX_SECONDS = 60.0

DatabaseUnavailable = db.DatabaseUnavailable


class Link:
    """One autocommit connection (the claim is a transaction by itself; the rest use db.transaction).

    `conn` is None once the link gave up (DatabaseUnavailable): what is in memory is left to the leases.
    """

    def __init__(self, target, kept=lambda: (0, 0), on_reconnect=lambda: None):
        # kept(): (requests in flight, outcomes not recorded yet), for the log; on_reconnect(): after each.
        self.target, self.kept, self.on_reconnect = target, kept, on_reconnect
        self.give_up_at = None  # set when the process stops: a wait "for ever" ends then too
        self.conn = self._connect()

    def _connect(self):
        """A new autocommit connection; DatabaseUnavailable when none (DatabaseSetupError: a configuration to fix)."""
        conn = db.connect(self.target)  # raises DatabaseUnavailable itself: refused, unreachable, not answering
        conn.autocommit = True
        return conn

    def run(self, turn, deadline):
        """`turn()`'s value; None when a lost connection cut it and was made again by `deadline` (None: for ever),
        or when a deadlock or serialization failure cut each of its CONFLICT_TRIES tries (the next turn tries again).

        A setup error (credentials, database, a pooler's configuration) is raised: waiting does not fix it.
        A failed statement (a bug) is raised too.
        """
        for tries in range(1, db.CONFLICT_TRIES + 1):
            try:
                return turn()
            except db.TransientConflict as error:
                # Its transaction was rolled back whole, and what it was recording is still held (worker.record):
                # the turn runs again as a whole.
                if tries == db.CONFLICT_TRIES:
                    log.warning("database conflict on each of %s tries, turn left for the next one error=%r",
                                tries, db.describe(error))
                    return None
                pause = db.conflict_pause(tries)
                log.warning("database conflict, turn retried in %.2f s (try %s of %s) error=%r",
                            pause, tries + 1, db.CONFLICT_TRIES, db.describe(error))
                time.sleep(pause)
            except db.DatabaseSetupError:
                raise
            except DatabaseUnavailable as error:
                self.reconnect(error, deadline)
                return None

    def reconnect(self, error, deadline):
        """Replace a lost connection, waiting with backoff; DatabaseUnavailable past `deadline` (or `give_up_at`)."""
        what = "not answering" if isinstance(error, db.DatabaseTimeout) else "connection lost"
        log.warning("database %s, reconnecting; %s requests in flight and %s outcomes kept error=%r",
                    what, *self.kept(), str(error).strip())
        try:
            self.conn.close()
        except (db.DatabaseUnavailable, db.Error):
            pass
        wait = RECONNECT_FIRST_SECONDS
        while True:
            try:
                self.conn = self._connect()
            except db.DatabaseSetupError:
                raise  # waiting does not fix it
            except DatabaseUnavailable as failure:
                limit = deadline if deadline is not None else self.give_up_at  # read again: a stop sets it
                if limit is not None and time.monotonic() + wait > limit:
                    self.conn = None
                    raise
                log.warning("database unreachable, retrying in %.1f s error=%r", wait, str(failure))
                # Slept whole (not cut by a finishing request): its outcome needs the database this backs off from.
                time.sleep(wait * random.uniform(0.5, 1.0))  # jitter: many workers do not come back at once
                wait = min(RECONNECT_MAX_SECONDS, wait * 2)
                continue
            self.on_reconnect()
            # Which server: with a multi-host DATABASE_URL, after a failover, another one than before.
            log.info("database connection restored; recording %s outcomes kept host=%s port=%s", self.kept()[1],
                     self.conn.info.host, self.conn.info.port)
            return

    def close(self):
        """Close the connection (if the link has one)."""
        if self.conn is not None:
            self.conn.close()


class Listener:
    """A connection LISTENing on CHANNEL, or none while the database is unreachable (or cannot be listened to)."""

    def __init__(self, target):
        self.target = target
        self.conn = None
        self._retry_at, self._retry_wait = 0.0, LISTEN_RETRY_FIRST_SECONDS  # when to try again; the wait after that
        self.deaf = False
        if target.pooler == "transaction":
            self._go_deaf()

    def _go_deaf(self):
        # A notification goes to the session that listens; a transaction pooler gives that session to
        # other clients between transactions, so LISTEN through it hears nothing, silently.
        self.deaf = True
        log.warning("LISTEN cannot work through a transaction pooler: new events are found by polling, "
                    "about a second late; set DATABASE_LISTEN_URL to a direct URL for sub-second delivery")

    def connect(self):
        """Listen on a new connection; True when listening (then anything committed meanwhile is news)."""
        if self.deaf or time.monotonic() < self._retry_at:
            return False
        try:
            conn = db.connect(self.target)
            if conn.target.pooler == "transaction":  # found by connect: DATABASE_POOLER is not set
                conn.close()
                self._go_deaf()
                return False
            conn.autocommit = True
            db.execute(conn, f"LISTEN {CHANNEL}")
        except DatabaseUnavailable as error:
            if isinstance(error, db.DatabaseSetupError):
                log.error("cannot LISTEN, a setup error (new events are found by polling): %s", db.describe(error))
                self.deaf = True
            self._retry_at = time.monotonic() + self._retry_wait
            self._retry_wait = min(LISTEN_RETRY_MAX_SECONDS, self._retry_wait * 2)
            return False
        self.conn, self._retry_at, self._retry_wait = conn, 0.0, LISTEN_RETRY_FIRST_SECONDS
        return True

    def retry_now(self):
        """Try listening at the next connect(), and back off from the first wait again: the database is back."""
        self._retry_at, self._retry_wait = 0.0, LISTEN_RETRY_FIRST_SECONDS

    def heard(self):
        """Take the notifications that have arrived, with no round trip; True when there is news.

        A connection found lost is made again at once, which is news too (notifications sent while
        not listening are gone).
        """
        if self.conn is None:
            return False
        try:
            self.conn.poll()
        except DatabaseUnavailable:
            self.close()
            return self.connect()
        news = bool(self.conn.notifies)
        self.conn.notifies.clear()
        return news

    def sockets(self):
        """What to wait on for a notification (none while not listening)."""
        return [] if self.conn is None else [self.conn]

    def close(self):
        """Stop listening."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class Wakeup:
    """A self-pipe the loop sleeps on in `sleep()`; `wake()` is safe from any thread or a signal handler."""

    def __init__(self):
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)  # a full pipe already means "wake up"
        self.asleep = False  # in sleep(): only then must a finishing request write to the pipe

    def wake(self):
        """Make the current or next sleep() return at once."""
        try:
            os.write(self._write, b".")
        except BlockingIOError:
            pass

    def sleep(self, timeout, also=(), ready=lambda: False):
        """Sleep until woken, one of `also` is readable, or `timeout` passes; at once when `ready()`."""
        self.asleep = True
        try:
            # Checked after `asleep` is set: whatever made ready() true before that wrote nothing.
            timeout = 0.0 if ready() else max(0.0, timeout)
            # poll(), not select(), which refuses a descriptor numbered 1024 or above.
            poller = select.poll()
            for waited in (self._read, *also):
                poller.register(waited, select.POLLIN)
            readable = [fd for fd, _events in poller.poll(timeout * 1000)]
        finally:
            self.asleep = False
        if self._read in readable:
            try:
                while os.read(self._read, 4096):
                    pass
            except BlockingIOError:
                pass

    def close(self):
        """Close both ends of the pipe."""
        os.close(self._read)
        os.close(self._write)
