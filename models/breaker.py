"""The circuit breaker of a process's database: a database that stopped answering costs one wait, not one a request.

Once a wait for the database has passed its deadline (models/deadline.py: the client deadline, or a
connect past its connect_timeout) with nothing else of the process's answered meanwhile, the breaker
is open: models.db.checkout refuses every connection at once with DatabaseUnavailable (the API answers
its 503 with Retry-After) instead of letting each request wait out its own deadline. A database that
answers slowly is not one that does not answer: while another statement of the process answered during
the wait, the breaker stays closed (a connect that needs longer than connect_timeout leaves the
requests to the connections the process has). Any statement that answers closes it. Every
PROBE_EVERY_SECONDS one checkout, the probe, is let through to find out whether the database answers
again (with one statement); its failure keeps it open until the next. One breaker per process and
target role (a gunicorn worker finds out for itself; a fork starts closed), shared by its threads: the
primary's, and the hot standby's when reads go there (models/standby.py), so that a lost primary never
refuses what the standby can read, nor a lost standby what the primary can.
"""
import logging
import os
import random
import threading
import time
from contextlib import contextmanager

from models.db_errors import DatabaseUnavailable

log = logging.getLogger(__name__)

# How long an open breaker refuses before it lets the probe through: as long as the 503's Retry-After
# (DATABASE_RETRY_AFTER, 5 s) at most, and a random part of it less, so that the workers of one
# service, opened by the same outage, do not all probe at once.
PROBE_EVERY_SECONDS = 5.0


class _State:
    """One breaker: a target role's (the primary's or the standby's)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.probe_at = None   # monotonic time from which the probe may go; None: closed
        self.probing = False   # whether the probe is out
        self.reason = ""       # what opened it, for the errors and the log
        self.answered_at = float("-inf")  # monotonic time of the process's last statement answered


_states = {False: _State(), True: _State()}  # by whether the target is a standby
_connecting = threading.local()  # .standby: the role of the connection this thread is making (standby_of)


def standby_of(conn):
    """Whether `conn` (answered or waited on) is a standby's: its target says, or while it is made, its connect."""
    target = getattr(conn, "target", None)
    if target is not None:
        return target.standby
    return getattr(_connecting, "standby", False)


@contextmanager
def connecting(standby):
    """The block makes a connection of this role: what its waits open or close is that role's breaker."""
    outer, _connecting.standby = getattr(_connecting, "standby", False), standby
    try:
        yield
    finally:
        _connecting.standby = outer


def admit(standby=False):
    """Whether this checkout is the probe (False while closed); DatabaseUnavailable at once while open otherwise."""
    state = _states[standby]
    if state.probe_at is None:  # closed: no lock on the path of every request
        return False
    with state.lock:
        if state.probe_at is None:
            return False
        wait = state.probe_at - time.monotonic()
        if state.probing or wait > 0:
            raise DatabaseUnavailable(f"{state.reason} (breaker open: one request at a time finds out whether it "
                                      f"is back)")
        state.probing = True
        return True


def opened(reason, since, standby=False):
    """A wait begun at `since` (time.monotonic()) passed its deadline: open the breaker, unless a statement
    answered meanwhile."""
    state = _states[standby]
    with state.lock:
        if state.answered_at < since:
            state.probe_at, state.reason = _next_probe(), reason


def answered(standby=False):
    """A statement of this process was answered: the database answers (the breaker closes)."""
    state = _states[standby]
    state.answered_at = time.monotonic()
    if state.probe_at is not None:  # open: rare, so the lock is taken only then
        probed(True, standby=standby)


def probed(ok, reason="", since=float("inf"), standby=False):
    """The probe's outcome: the database answered (close the breaker), or it did not (keep it open).

    A probe that failed after a statement begun since `since` answered leaves the breaker closed.
    """
    state = _states[standby]
    with state.lock:
        was_open = state.probe_at is not None
        state.probing = False
        if ok or state.answered_at >= since:
            state.probe_at = None
        else:
            state.probe_at, state.reason = _next_probe(), reason or state.reason
    if not is_open(standby) and was_open:
        log.warning("%s answering again", "the standby" if standby else "database")


def is_open(standby=False):
    """Whether the database (the standby, with `standby`) is taken for not answering now (then only the probe
    waits on it)."""
    return _states[standby].probe_at is not None


def _next_probe():
    return time.monotonic() + PROBE_EVERY_SECONDS * random.uniform(0.5, 1.0)


def _reset():
    global _states
    _states = {False: _State(), True: _State()}


os.register_at_fork(after_in_child=_reset)
