"""A deadline on each wait for the database, kept by the client, for what the server's timeouts cannot see.

`statement_timeout` is the server's own: a statement queued in a pooler for a server connection
(PgBouncer waits `query_wait_timeout`, 120 s by default, while the database is away) or sent to a
server that stopped answering never reaches it, and the request would hang until gunicorn kills its
worker. psycopg2's wait callback lets the process wait on the connection's socket itself: this one
waits at most the deadline for each answer, then gives up. psycopg2 closes a connection whose wait
failed, so it leaves the pool, and the error is a QueryCanceledError, which the connection layer
raises as DatabaseTimeout (models/db_errors.py; the API answers 503). Passing the process's deadline,
or a connect's `connect_timeout`, opens the circuit breaker (models/breaker.py): the database is taken
for not answering; not a connect passing its limit at one host of a multi-host URL while others are
left to try (the connection layer tries them: without_host). Installed in gunicorn's workers (gunicorn.conf.py)
and the delivery process: a wait callback runs every statement through psycopg2's asynchronous mode,
which has no COPY (the seed's).
"""
import select
import threading
import time
from contextlib import contextmanager

import psycopg2.extensions

from models import breaker

# Above a statement timeout of the server's, the time its answer (an error) has to arrive.
MARGIN_SECONDS = 3

# How long a host of a multi-host URL that did not answer a connect is tried last by this process.
SILENT_SECONDS = 60.0

_seconds, _name = None, ""
_silent = {}  # (host, port) of a multi-host URL that did not answer a connect: tried last until this monotonic time
_local = threading.local()  # .within: a shorter deadline for this thread's current block (within())


def install(seconds, name="DATABASE_CLIENT_TIMEOUT"):
    """Every wait of this process's connections for the database lasts at most `seconds` (None or 0: no limit).

    `name` says where the number comes from, in the error past it.
    """
    global _seconds, _name
    _seconds, _name = (float(seconds) if seconds else None), name
    psycopg2.extensions.set_wait_callback(_wait if _seconds else None)


@contextmanager
def installed(seconds, name):
    """install(seconds, name) for the block; then the deadline as it was."""
    before = _seconds, _name
    install(seconds, name)
    try:
        yield
    finally:
        install(*before)


def beyond(statement_timeout, name):
    """(seconds, name) of a deadline a little above a statement timeout (None when it is 0: no deadline)."""
    if not statement_timeout:
        return None, name
    return statement_timeout + MARGIN_SECONDS, f"{name} + {MARGIN_SECONDS} s"


@contextmanager
def within(seconds):
    """In the block, each wait of this thread lasts at most `seconds` (None: no shorter than otherwise).

    For an answer that is worth less than the wait (a count the description can do without, a
    readiness check): passing this deadline does not open the breaker. Only where install() was called.
    """
    outer = getattr(_local, "within", None)
    _local.within = min(seconds, outer or seconds) if seconds else outer
    try:
        yield
    finally:
        _local.within = outer


def aside():
    """From now on, this thread's waits neither open nor close the breaker (a listening connection's thread:
    what it hears of the database says nothing of the requests' statements). Its deadlines still apply."""
    _local.aside = True


def _limit(conn):
    # (seconds, whether passing it opens the breaker, what it is) of this wait: the shortest that applies.
    limit = (_seconds, True, _name)
    if conn.status == psycopg2.extensions.STATUS_SETUP:
        # A connection being made: libpq keeps connect_timeout only when it waits by itself.
        timeout = float(psycopg2.extensions.parse_dsn(conn.dsn).get("connect_timeout") or 0)
        if 0 < timeout <= limit[0]:
            limit = (timeout, True, "connect_timeout")
    within_seconds = getattr(_local, "within", None)
    if within_seconds and within_seconds < limit[0]:
        limit = (within_seconds, False, None)
    return limit


_EVENTS = {psycopg2.extensions.POLL_READ: select.POLLIN, psycopg2.extensions.POLL_WRITE: select.POLLOUT}


def _wait(conn):
    """psycopg2's wait callback: poll the connection until its operation is done or the deadline passes."""
    seconds, opens, name = _limit(conn)
    connecting = conn.status == psycopg2.extensions.STATUS_SETUP  # (the status moves on while it connects)
    started = time.monotonic()
    deadline = started + seconds
    while True:
        # The driver's own poll: its error reaches the statement or connect being waited for, which translates it.
        state = psycopg2.extensions.connection.poll(conn)
        if state == psycopg2.extensions.POLL_OK:
            # A pooler answers a connection by itself.
            if conn.status != psycopg2.extensions.STATUS_SETUP and not getattr(_local, "aside", False):
                breaker.answered(breaker.standby_of(conn))
            return
        remaining = deadline - time.monotonic()
        if remaining > 0:
            if state not in _EVENTS:
                raise psycopg2.OperationalError(f"bad state from poll: {state}")
            # poll(), not select(): a gthread worker holds up to 1,000 client sockets, and select() refuses
            # a descriptor numbered 1024 or above.
            poller = select.poll()
            poller.register(conn.fileno(), _EVENTS[state])
            if poller.poll(remaining * 1000):
                continue
        message = f"the database did not answer within {seconds:g} s" + (f" ({name})" if name else "")
        if name == "connect_timeout":
            message = "timeout expired: " + message  # libpq's own words when it keeps connect_timeout
        hung, others = None, None
        if connecting:  # libpq was trying one host of the URL
            hung = (conn.info.host, str(conn.info.port))
            others = without_host(conn.dsn, hung)  # its password is hidden: only to know whether others remain
        if opens and others is None and not getattr(_local, "aside", False):
            breaker.opened(message, started, breaker.standby_of(conn))
        error = psycopg2.extensions.QueryCanceledError(message + (f" at {hung[0]}:{hung[1]}" if others else ""))
        error.hung_host = hung if others else None  # the connection layer tries the others
        if others:
            _silent[hung] = time.monotonic() + SILENT_SECONDS
        raise error


def silent_last(dsn):
    """`dsn` with the hosts that lately did not answer a connect of this process moved last (else as it is).

    After a failover the old primary's address may stay in the URL for a while: when its machine is gone,
    each new connection would wait its connect timeout there before trying the new primary.
    """
    now = time.monotonic()
    parameters, pairs = _hosts(dsn)
    last = [pair for pair in pairs if _silent.get((pair[0], pair[1] or "5432"), 0) > now]
    ordered = [pair for pair in pairs if pair not in last] + last
    return dsn if ordered == pairs else _with_hosts(parameters, ordered)


def without_host(dsn, host):
    """`dsn` without `host` ((name, port)) when it names other hosts too (a multi-host URL), else None.

    libpq tries the hosts of a multi-host URL in turn, each for connect_timeout, when it waits by
    itself; waited for here, a connect passing its limit at one host (connect_timeout, or a shorter
    deadline: /readyz's) ends there, so the connection layer makes it again without that host
    (models/connections.py).
    """
    parameters, pairs = _hosts(dsn)
    kept = [(name, port) for name, port in pairs if (name, port or "5432") != host]
    if not kept or len(kept) == len(pairs):
        return None
    return _with_hosts(parameters, kept)


def _hosts(dsn):
    # (the parameters of `dsn`, its (host, port) pairs); no pairs for one host, hostaddr (left to libpq), or
    # what is not a URL (the connect says so).
    try:
        parameters = psycopg2.extensions.parse_dsn(dsn)
    except psycopg2.ProgrammingError:
        return {}, []
    hosts = parameters.get("host", "").split(",")
    ports = parameters.get("port", "").split(",")
    if len(hosts) < 2 or "hostaddr" in parameters:
        return parameters, []
    return parameters, list(zip(hosts, ports * len(hosts) if len(ports) == 1 else ports))


def _with_hosts(parameters, pairs):
    parameters = {**parameters, "host": ",".join(name for name, _port in pairs),
                  "port": ",".join(port for _name, port in pairs)}
    if not parameters["port"].strip(","):
        del parameters["port"]  # none named: libpq's default for each
    return psycopg2.extensions.make_dsn(**parameters)
