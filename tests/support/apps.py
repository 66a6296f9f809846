"""The application as the tests make it: counting each request's statements, under the tests' secret key."""
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
