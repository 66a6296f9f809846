"""GET /healthz, /readyz and /metrics: answered before the API's hooks, so no token and never rate-limited.

They are for load balancers and Prometheus, not API clients, and are not in /openapi.json
(docs/operations.md, "Health checks, metrics and logs", describes them).
"""
import ipaddress
import json
import threading
import time

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from api import metrics
from api.errors import UNKNOWN_ROUTE_MESSAGE, MethodNotAllowedError, ServiceUnavailable, UnknownRoute
from models import db, deadline, migrations, monitoring

# A load balancer checks every second or two, from every balancer to every worker: one statement a
# second per worker at most, whatever the number of checks.
READY_CACHE_SECONDS = 1.0
_NO_STORE = [("Cache-Control", "no-store")]


def _json(status, body, headers=()):
    data = json.dumps(body, separators=(",", ":")).encode()
    return status, [("Content-Type", "application/json"), *_NO_STORE, *headers], data


def _error(error):
    return _json(error.status, error.body(), error.headers.items())


class Probes:
    """The three paths and their answers; one per process (the readiness answer is cached here)."""

    def __init__(self, config, database):
        self.config = config
        self.database = database  # what models.db.checkout takes: the API's own connections
        self.networks = [ipaddress.ip_network(network) for network in config["METRICS_ALLOWED_NETWORKS"]]
        self.paths = {"/healthz": self.healthz, "/readyz": self.readyz, "/metrics": self.metrics}
        self._ready = (float("-inf"), None)
        self._ready_lock = threading.Lock()

    def answer(self, environ):
        """(status, headers, body) for a probe path, else None (the request is the API's)."""
        probe = self.paths.get(environ.get("PATH_INFO"))
        if probe is None:
            return None
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return _error(MethodNotAllowedError())
        return probe(environ)

    def healthz(self, _environ):
        """200 while the process serves requests; the database is not asked."""
        return _json(200, {"status": "ok"})

    def readyz(self, _environ):
        """200 when the database answers in time and its schema is this code's, else 503; cached a second."""
        with self._ready_lock:
            expires, answer = self._ready
            if time.monotonic() >= expires:
                answer = self._check_ready()
                self._ready = (time.monotonic() + READY_CACHE_SECONDS, answer)
            return answer

    def _check_ready(self):
        url, timeout = self.database, self.config["PROBE_TIMEOUT_SECONDS"]
        # The timeout bounds the client's waits too (models/deadline.py), the connection's included: a
        # database that accepts connections and never answers is "not ready" within it, and at once
        # while the breaker is open (models/breaker.py), unless this check is the one that finds out.
        with deadline.within(timeout):
            return self._ask_ready(url, timeout)

    def _ask_ready(self, url, timeout):
        try:
            conn = db.checkout(url)
        except db.DatabaseUnavailable:
            return self._not_ready("the service cannot reach its database")
        broken = False
        try:
            conn.autocommit = True
            state = monitoring.schema_state(conn, timeout)
        except db.DatabaseTimeout:
            if conn.closed:  # the client's deadline (models/deadline.py) gave the connection up: out of reach
                return self._not_ready("the service cannot reach its database")
            return self._not_ready(f"the database did not answer within {timeout:g} s")
        except db.UndefinedTable:
            return self._not_ready("the database has no schema: run `flask --app app db init`")
        except (db.DatabaseUnavailable, db.OperationalError, db.InterfaceError) as error:
            broken = isinstance(error, db.DatabaseLost) or bool(conn.closed)
            return self._not_ready("the service cannot reach its database")
        finally:
            db.checkin(url, conn, broken=broken)
        problem = migrations.version_problem(state["applied"], state["newest"])
        if problem is not None:
            return self._not_ready(problem)
        return _json(200, {"status": "ready", "schema_version": state["newest"]})

    def _not_ready(self, reason):
        retry_after = self.config["DATABASE_RETRY_AFTER"]
        return _error(ServiceUnavailable(retry_after, f"Not ready: {reason}. Retry after the number of seconds in "
                                                      f"Retry-After ({retry_after})."))

    def metrics(self, environ):
        """The Prometheus text exposition, to allowed networks only (404 elsewhere, as for any unknown path)."""
        if not self.config["METRICS_ENABLED"] or not self.allowed(environ.get("REMOTE_ADDR")):
            return _error(UnknownRoute(UNKNOWN_ROUTE_MESSAGE))
        body = metrics.exposition(self.database, self.config["PROBE_TIMEOUT_SECONDS"])
        return 200, [("Content-Type", CONTENT_TYPE_PLAIN_0_0_4), *_NO_STORE], body

    def allowed(self, address):
        """Whether `address` (the client's, after TRUSTED_PROXIES) is in METRICS_ALLOWED_NETWORKS."""
        try:
            client = ipaddress.ip_address(address or "")
        except ValueError:
            return False
        return any(client in network for network in self.networks)
