"""The cursor and connection classes of every connection (models.db.connect), prepared statements, and the
three calls every model runs its statements through (execute, execute_one, execute_all).

Where the driver is called (a statement, a fetch, a new cursor, a commit, a rollback, the autocommit and
isolation setters, a LISTEN connection's poll), its error meaning the database is away is raised as the
project's own (models/db_errors.py); a statement's error passes as it is.
"""
import re
from datetime import datetime, timezone

import psycopg2
import psycopg2.extensions

from models.db_errors import translate

_IDLE = psycopg2.extensions.TRANSACTION_STATUS_IDLE
_DRIVER = psycopg2.extensions.connection  # the driver's own methods and setters, which Connection translates

# The ends of what schema.sql's is_api_timestamp accepts. A value outside them ('infinity', a BC date, a
# year past 9999: stored before that rule, or by a writer the rule did not hold) reads as the nearest end
# rather than raising in the fetch: one such row would otherwise take away every page it is on. The driver
# raises ValueError for the years Python cannot hold and reads 'infinity' as datetime.max.
EARLIEST = datetime(1, 1, 2, tzinfo=timezone.utc)
LATEST = datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=timezone.utc)


def _shown(cast, earliest, latest):
    def shown(value, cur):
        try:
            moment = cast(value, cur)
        except ValueError:
            return earliest if value.endswith(" BC") else latest
        if moment is None:
            return None
        return min(max(moment, earliest), latest)
    return shown


_TIMESTAMPTZ = psycopg2.extensions.new_type((1184,), "TIMESTAMPTZ_SHOWN",
                                            _shown(psycopg2.extensions.PYDATETIMETZ, EARLIEST, LATEST))
_DATE = psycopg2.extensions.new_type((1082,), "DATE_SHOWN",
                                     _shown(psycopg2.extensions.PYDATE, EARLIEST.date(), LATEST.date()))
for _type, _array_oid in ((_TIMESTAMPTZ, 1185), (_DATE, 1182)):
    psycopg2.extensions.register_type(_type)
    psycopg2.extensions.register_type(psycopg2.extensions.new_array_type((_array_oid,), f"{_type.name}[]", _type))


class Cursor(psycopg2.extensions.cursor):
    """A cursor whose rows are plain dicts.

    Rows are built with dict(zip(...)) rather than psycopg2's RealDictCursor, which calls a Python
    __setitem__ for every column of every row: on wide rows that is most of the cost. On a
    connection through a transaction pooler, the first statement of each transaction carries the
    session's settings (Connection.transaction_prefix) in the same round trip.
    """

    def execute(self, query, vars=None):
        conn = self.connection
        if conn.transaction_prefix and conn.info.transaction_status == _IDLE:
            if not isinstance(query, str):
                query = query.as_string(conn)
            # A level the BEGIN named (models.db.one_snapshot) stays; any other transaction takes the pinned one.
            named = not conn.autocommit and conn.isolation_level is not None
            query = ("" if named else conn.isolation_prefix) + conn.transaction_prefix + query
        try:
            return super().execute(query, vars)
        except psycopg2.Error as error:
            _raise_translated(error, conn)

    def _columns(self):
        return [column.name for column in self.description]

    def fetchone(self):
        try:
            row = super().fetchone()
        except psycopg2.Error as error:
            _raise_translated(error, self.connection)
        return None if row is None else dict(zip(self._columns(), row))

    def fetchmany(self, size=None):
        try:
            rows = super().fetchmany(self.arraysize if size is None else size)
        except psycopg2.Error as error:
            _raise_translated(error, self.connection)
        return self._dicts(rows)

    def fetchall(self):
        try:
            rows = super().fetchall()
        except psycopg2.Error as error:
            _raise_translated(error, self.connection)
        return self._dicts(rows)

    def _dicts(self, rows):
        if not rows:
            return rows
        columns = self._columns()    # once per fetch, not once per row
        return [dict(zip(columns, row)) for row in rows]

    def __iter__(self):
        while (row := self.fetchone()) is not None:
            yield row


class Connection(psycopg2.extensions.connection):
    """A connection that knows what it has prepared and how its transactions open.

    `transaction_prefix` is empty on a connection that keeps its session (direct, or a declared
    session pooler): its settings were SET once when it was made. Through a transaction pooler each
    transaction may run on another server session, so `SET LOCAL`s open every transaction instead and
    nothing is prepared (`prepares` is False); `isolation_prefix` sets the isolation of a transaction
    that names none (a session's default isolation would shape the next one, not this one).
    """

    prepared = frozenset()
    prepares = True
    transaction_prefix = ""
    isolation_prefix = ""
    target = None

    def commit(self):
        """Commit; DatabaseLost (or another DatabaseUnavailable) when the database is away."""
        _translated(_DRIVER.commit, self)

    def rollback(self):
        """Roll back; DatabaseLost (or another DatabaseUnavailable) when the database is away."""
        _translated(_DRIVER.rollback, self)

    def cursor(self, *args, **kwargs):
        """A new cursor; DatabaseLost on a connection already closed (the driver's InterfaceError)."""
        return _translated(_DRIVER.cursor, self, *args, **kwargs)

    def poll(self):
        """Read what the server sent (a LISTEN connection's notifications); DatabaseLost when it is gone."""
        return _translated(_DRIVER.poll, self)

    # The setters refuse a closed connection with the driver's InterfaceError: db.transaction sets both
    # around its block, on a connection the block may have lost.
    autocommit = property(_DRIVER.autocommit.__get__,
                          lambda self, value: _translated(_DRIVER.autocommit.__set__, self, value))
    isolation_level = property(_DRIVER.isolation_level.__get__,
                               lambda self, value: _translated(_DRIVER.isolation_level.__set__, self, value))


def _translated(call, conn, *args, **kwargs):
    # `call(conn, ...)`, one of the driver's own, its error meaning the database is away raised as the project's.
    try:
        return call(conn, *args, **kwargs)
    except psycopg2.Error as error:
        _raise_translated(error, conn)


def _raise_translated(error, conn):
    # Called in an except clause: a statement's error is raised again as it is (its traceback kept).
    unavailable = translate(error, conn)
    if unavailable is None or unavailable is error:
        raise error
    raise unavailable from error


class Prepared:
    """A statement the server parses and plans once per connection (PREPARE), then runs by name (EXECUTE).

    For the statements every request runs, whose plan does not depend on the values: planning a
    four-table join costs more than running it. Not for statements with optional `IS NULL OR` filters,
    which only a plan made for the values folds away. Written with `%(name)s` parameters like any other
    statement; each name becomes one `$n`. A connection through a transaction pooler runs the
    statement itself: a prepared statement lives in one server session, which the pooler does not keep.
    """

    def __init__(self, name, sql):
        names = []

        def number(match):
            if match.group(1) not in names:
                names.append(match.group(1))
            return f"${names.index(match.group(1)) + 1}"

        self.name, self.sql = name, sql
        self.prepare_sql = f"PREPARE {name} AS " + re.sub(r"%\((\w+)\)s", number, sql).replace("%%", "%")
        self.execute_sql = f"EXECUTE {name} (" + ", ".join(f"%({each})s" for each in names) + ")"

    def execute(self, cur, params):
        """Run the statement on `cur` with `params`, preparing it first on a connection that has not."""
        conn = cur.connection
        if not conn.prepares:
            cur.execute(self.sql, params)
            return
        if self.name not in conn.prepared:
            # A statement of its own: a PREPARE sent with the EXECUTE would outlive a failed EXECUTE.
            cur.execute(self.prepare_sql)
            conn.prepared = conn.prepared | {self.name}
        cur.execute(self.execute_sql, params)



def execute(conn, statement, params=None):
    """Run one statement (SQL text, or a Prepared) on `conn`; the number of rows it wrote (or returned)."""
    with conn.cursor() as cur:
        _run(cur, statement, params)
        return cur.rowcount


def execute_one(conn, statement, params=None):
    """The first row (a dict) one statement returns, or None when it returns none."""
    with conn.cursor() as cur:
        _run(cur, statement, params)
        return cur.fetchone()


def execute_all(conn, statement, params=None):
    """Every row (a dict each) one statement returns, in its order."""
    with conn.cursor() as cur:
        _run(cur, statement, params)
        return cur.fetchall()


def _run(cur, statement, params):
    if isinstance(statement, Prepared):
        statement.execute(cur, params)
    else:
        cur.execute(statement, params)
