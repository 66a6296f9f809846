"""What `--watch` hears: a connection LISTENing on the channel the outbox triggers NOTIFY (schema.sql,
`pg_notify('webhook_events', '')` when an event is written), made again whenever it was lost."""
import logging
import time

import psycopg2

from models import db

CHANNEL = "webhook_events"
# After a failed try, listening is tried again after this long, doubling up to the cap: a database that
# does not answer holds each try for the connect timeout, and meanwhile new events are found by polling.
RETRY_FIRST_SECONDS = 5.0
RETRY_MAX_SECONDS = 60.0
log = logging.getLogger("delivery")


class Listener:
    """A LISTEN connection, or none while the database is unreachable (or cannot be listened to)."""

    def __init__(self, target):
        self.target = target
        self.conn = None
        self._retry_at, self._retry_wait = 0.0, RETRY_FIRST_SECONDS  # when to try again; the wait after that
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
            with conn.cursor() as cur:
                cur.execute(f"LISTEN {CHANNEL}")
        except psycopg2.OperationalError as error:
            if db.classify(error) == db.SETUP:
                log.error("cannot LISTEN, a setup error (new events are found by polling): %s", db.describe(error))
                self.deaf = True
            self._retry_at = time.monotonic() + self._retry_wait
            self._retry_wait = min(RETRY_MAX_SECONDS, self._retry_wait * 2)
            return False
        self.conn, self._retry_at, self._retry_wait = conn, 0.0, RETRY_FIRST_SECONDS
        return True

    def heard(self):
        """Take the notifications that have arrived, with no round trip; True when there is news.

        A connection found lost is made again at once, which is news too (notifications sent while
        not listening are gone).
        """
        if self.conn is None:
            return False
        try:
            self.conn.poll()
        except (psycopg2.OperationalError, psycopg2.InterfaceError):
            self.close()
            return self.connect()
        news = bool(self.conn.notifies)
        self.conn.notifies.clear()
        return news

    def sockets(self):
        """What to wait on for a notification (none while not listening)."""
        return [] if self.conn is None else [self.conn]

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None
