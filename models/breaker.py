"""The circuit breaker of a process's database: a database that stopped answering costs one wait, not one a request.

Once a wait for the database has passed its deadline (models/deadline.py: the client deadline, or a
connect past its connect_timeout) with nothing else of the process's answered meanwhile, the breaker
is open: models.db.checkout refuses every connection at once with DatabaseUnavailable (the API answers
its 503 with Retry-After) instead of letting each request wait out its own deadline. A database that
answers slowly is not one that does not answer: while another statement of the process answered during
the wait, the breaker stays closed (a connect that needs longer than connect_timeout leaves the
requests to the connections the process has). Any statement that answers closes it. Every
PROBE_EVERY_SECONDS one checkout, the probe, is let through to find out whether the database answers
again (with one statement); its failure keeps it open until the next. One breaker per process (a
gunicorn worker finds out for itself; a fork starts closed), shared by its threads.
"""
import logging
import os
import random
import threading
import time

from models.db_errors import DatabaseUnavailable

log = logging.getLogger(__name__)

# How long an open breaker refuses before it lets the probe through: as long as the 503's Retry-After
# (DATABASE_RETRY_AFTER, 5 s) at most, and a random part of it less, so that the workers of one
# service, opened by the same outage, do not all probe at once.
PROBE_EVERY_SECONDS = 5.0

_lock = threading.Lock()
_probe_at = None   # monotonic time from which the probe may go; None: closed
_probing = False   # whether the probe is out
_reason = ""       # what opened it, for the errors and the log
_answered_at = float("-inf")  # monotonic time of the process's last statement answered


def admit():
    """Whether this checkout is the probe (False while closed); DatabaseUnavailable at once while open otherwise."""
    global _probing
    if _probe_at is None:  # closed: no lock on the path of every request
        return False
    with _lock:
        if _probe_at is None:
            return False
        wait = _probe_at - time.monotonic()
        if _probing or wait > 0:
            raise DatabaseUnavailable(f"{_reason} (breaker open: one request at a time finds out whether it is back)")
        _probing = True
        return True


def opened(reason, since):
    """A wait begun at `since` (time.monotonic()) passed its deadline: open the breaker, unless a statement answered meanwhile."""
    global _probe_at, _reason
    with _lock:
        if _answered_at < since:
            _probe_at, _reason = _next_probe(), reason


def answered():
    """A statement of this process was answered: the database answers (the breaker closes)."""
    global _answered_at
    _answered_at = time.monotonic()
    if _probe_at is not None:  # open: rare, so the lock is taken only then
        probed(True)


def probed(ok, reason="", since=float("inf")):
    """The probe's outcome: the database answered (close the breaker), or it did not (keep it open).

    A probe that failed after a statement begun since `since` answered leaves the breaker closed.
    """
    global _probe_at, _probing, _reason
    with _lock:
        was_open = _probe_at is not None
        _probing = False
        if ok or _answered_at >= since:
            _probe_at = None
        else:
            _probe_at, _reason = _next_probe(), reason or _reason
    if not is_open() and was_open:
        log.warning("database answering again")


def is_open():
    """Whether the database is taken for not answering now (then only the probe waits on it)."""
    return _probe_at is not None


def _next_probe():
    return time.monotonic() + PROBE_EVERY_SECONDS * random.uniform(0.5, 1.0)


def _reset():
    global _lock, _probe_at, _probing, _reason, _answered_at
    _lock, _probe_at, _probing, _reason, _answered_at = threading.Lock(), None, False, "", float("-inf")


os.register_at_fork(after_in_child=_reset)
