"""The retry policy as data plus pure functions (SPEC: Delivery and retries)."""
from datetime import timedelta

# Delay before each attempt after a failure of the previous one: 8 attempts in
# all, the first immediately, then 1 min, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h.
SCHEDULE = (
    timedelta(0),
    timedelta(minutes=1),
    timedelta(minutes=5),
    timedelta(minutes=30),
    timedelta(hours=2),
    timedelta(hours=5),
    timedelta(hours=10),
    timedelta(hours=10),
)
MAX_ATTEMPTS = len(SCHEDULE)

# An endpoint failing for more than this long is disabled; a day without a
# failed delivery restarts the count.
DISABLE_AFTER = timedelta(days=3)
FAILURE_RUN_GAP = timedelta(days=1)
# The admins are warned once a failure run has lasted this long (before the 3-day rule disables).
WARN_AFTER = timedelta(hours=24)

# Attempts (and finished events) are kept this long.
RETENTION = timedelta(days=30)


def next_attempt_at(attempt, attempted_at, max_attempts=MAX_ATTEMPTS):
    """When the attempt after a failed attempt number `attempt` (at `attempted_at`) is due; None when none is left."""
    if attempt >= min(max_attempts, MAX_ATTEMPTS):
        return None
    return attempted_at + SCHEDULE[attempt]


def failure_run(failing_since, last_failure_at, failed_at):
    """The start of the failure run after a failure at `failed_at` (a day without failures starts a new run)."""
    if failing_since is None or last_failure_at is None or failed_at - last_failure_at > FAILURE_RUN_GAP:
        return failed_at
    return failing_since


def disables_at(failing_since):
    """When a failure run started at `failing_since` disables the endpoint: at the first failure after this."""
    return None if failing_since is None else failing_since + DISABLE_AFTER


def should_disable(failing_since, failed_at):
    """True when failures have kept coming for more than DISABLE_AFTER."""
    return failing_since is not None and failed_at - failing_since > DISABLE_AFTER
