"""What `--watch` hears: a connection LISTENing on the channel the outbox triggers NOTIFY (schema.sql,
`pg_notify('webhook_events', '')` when an event is written), made again whenever it was lost."""
import psycopg2

from models import db

CHANNEL = "webhook_events"


class Listener:
    """A LISTEN connection, or none while the database is unreachable."""

    def __init__(self, database_url):
        self.database_url = database_url
        self.conn = None

    def connect(self):
        """Listen on a new connection; True when listening (then anything committed meanwhile is news)."""
        try:
            conn = db.connect(self.database_url)
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(f"LISTEN {CHANNEL}")
        except psycopg2.OperationalError:
            return False
        self.conn = conn
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
