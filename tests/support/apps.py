"""The application as the tests make it: counting each request's statements, under the tests' secret key."""
import time

from tests.support.counting import count_statements
from tests.support.webhooks import TEST_SECRET_KEY

# Rate limits high enough never to matter to tests that are not about them.
NO_RATE_LIMITS = {"window_seconds": 300, "per_token": 100000, "per_ip": 100000, "anonymous_per_ip": 100000}


def make_app(url, **config):
    """The application on database `url` for tests, counting each request's statements (tests/support/counting.py).

    Webhook secrets are encrypted with the tests' key, as in a deployment that has one.
    """
    from app import create_app

    return count_statements(create_app({"TESTING": True, "DATABASE_URL": url, "SECRET_KEY": TEST_SECRET_KEY,
                                        **config}))


def with_limits(app, **limits):
    """Another application on `app`'s database and storage with these rate limits (the rest as `app`'s).

    The limits are read when an application starts counting: its processes keep reservations of them.
    """
    return make_app(app.config["DATABASE_URL"], STORAGE_DIR=app.config["STORAGE_DIR"],
                    RATE_LIMITS={**app.config["RATE_LIMITS"], **limits})


# Every API process sees a change to a token, a member or an organization within this many seconds
# (api/guard.py keeps principals per process, models/principals.py).
PRINCIPALS_SEEN_SECONDS = 2.0


def once_seen(send, seen):
    """`send()`'s first response that `seen(response)` accepts within PRINCIPALS_SEEN_SECONDS, else the last one.

    For a request after a change to a principal made behind the application's back, which every process
    promises to see within that time, not at once.
    """
    deadline = time.monotonic() + PRINCIPALS_SEEN_SECONDS
    while True:
        response = send()
        if seen(response) or time.monotonic() > deadline:
            return response
        time.sleep(0.02)


def warmed(app, client, headers):
    """Make `app`'s process warm for a token: it keeps the principal while it hears changes (a notification of
    the version pin included), and holds a reservation of the token's limits: GET /organization until the
    guard has sent no statement twice in a row."""
    from tests.support.counting import guard_statement_counts
    from tests.support.processes import wait_for

    client.get("/organization", headers=headers)
    kept = app.extensions["principals"]
    assert wait_for(lambda: kept.listener.epoch() is not None, 10), "the process never listened"
    kept.forget()                       # kept before it listened: looked up again, now while it hears
    counts = guard_statement_counts(app)

    def warm():
        client.get("/organization", headers=headers)
        return counts[-2:] == [0, 0]
    assert wait_for(warm, 10), counts
