"""The circuit breaker of a process's database: a database that stopped answering costs one wait, not one a request.

Once a wait for the database has passed its deadline (models/deadline.py: the client deadline, or a
connect past its connect_timeout), the breaker is open: models.db.checkout refuses every connection
at once with DatabaseUnavailable (the API answers its 503 with Retry-After) instead of letting each
request wait out its own deadline. Every PROBE_EVERY_SECONDS one checkout, the probe, is let through
to find out whether the database answers again (on a new connection, with one statement): its answer
closes the breaker, its failure keeps it open until the next. One breaker per process (a gunicorn
worker finds out for itself; a fork starts closed), shared by its threads.
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


def opened(reason):
    """A wait for the database passed its deadline: open the breaker, or keep it open (a probe out stays out)."""
    global _probe_at, _reason
    with _lock:
        _probe_at, _reason = _next_probe(), reason


def probed(answered, reason=""):
    """The probe's outcome: the database answered (close the breaker), or it did not (keep it open)."""
    global _probe_at, _probing, _reason
    with _lock:
        was_open = _probe_at is not None
        _probing = False
        if answered:
            _probe_at = None
        else:
            _probe_at, _reason = _next_probe(), reason or _reason
    if answered and was_open:
        log.warning("database answering again")


def is_open():
    """Whether the database is taken for not answering now (then only the probe waits on it)."""
    return _probe_at is not None


def _next_probe():
    return time.monotonic() + PROBE_EVERY_SECONDS * random.uniform(0.5, 1.0)


def _reset():
    global _lock, _probe_at, _probing, _reason
    _lock, _probe_at, _probing, _reason = threading.Lock(), None, False, ""


os.register_at_fork(after_in_child=_reset)
