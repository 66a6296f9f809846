"""What the API answers while its database cannot be reached, and outages made on demand."""
import time
from contextlib import contextmanager

from psycopg2.extensions import parse_dsn

from tests.support.tcp_proxy import TcpProxy

UNAVAILABLE = {"error": {"type": "api_error", "code": "service_unavailable",
                         "message": "The service cannot reach its database right now. Retry after the number of "
                                    "seconds in Retry-After (5).",
                         "param": None}}


def assert_unavailable(response):
    """The spec's error object for a database that cannot be reached, with Retry-After and no rate-limit headers."""
    body = response.get_json() if hasattr(response, "get_json") else response.json()
    assert (response.status_code, body) == (503, UNAVAILABLE)
    assert response.headers["Retry-After"] == "5"
    assert "RateLimit" not in response.headers and "Service-Version" not in response.headers


def proxy_to(database_url):
    """A TcpProxy (not started) to the server of `database_url`; its url() is the database through it."""
    target = parse_dsn(database_url)
    return TcpProxy((target.get("host") or "127.0.0.1", int(target.get("port") or 5432)))


@contextmanager
def client_deadline(seconds):
    """models.deadline installed in this process for the block; then none, and the breaker closed again."""
    from models import breaker, deadline

    deadline.install(seconds)
    try:
        yield
    finally:
        deadline.install(None)
        breaker.probed(True)


def timed(call, *args, **kwargs):
    """(seconds, what `call` returned)."""
    started = time.monotonic()
    answer = call(*args, **kwargs)
    return time.monotonic() - started, answer
