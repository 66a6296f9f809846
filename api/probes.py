"""GET /healthz, /readyz and /metrics: answered before the API's hooks, so no token and never rate-limited.

They are for load balancers and Prometheus, not API clients, and are not in /openapi.json
(docs/operations.md, "Health checks, metrics and logs", describes them).
"""
import ipaddress
import json
import os
import threading
import time

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from api import metrics
from api.errors import UNKNOWN_ROUTE_MESSAGE, MethodNotAllowedError, ServiceUnavailable, UnknownRoute
from models import breaker, db, deadline, migrations, monitoring

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
        self._conn, self._conn_pid = None, None  # the readiness check's connection (_connection)
        # With reads on hot standbys (docs/scaling.md), a process whose primary is away still serves: ready,
        # when the standby is (its own check's connection, made as the primary's).
        replica = config.get("DATABASE_REPLICA_URL")
        self.standby = Probes(config | {"DATABASE_URL": replica, "DATABASE_REPLICA_URL": None},
                              db.Target.from_config(config, "api", url=replica, standby=True)) if replica else None

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
        """200 when the database answers in time and its schema is this code's, else 503; cached a second.

        With standbys, 200 too while the primary is not ready and a standby is (`reads_only`: reads are served).
        """
        with self._ready_lock:
            expires, answer = self._ready
            if time.monotonic() >= expires:
                answer = self._check_ready()
                self._ready = (time.monotonic() + READY_CACHE_SECONDS, answer)
            return answer

    def _check_ready(self):
        answer = self._check_this()
        if answer[0] == 200 or self.standby is None:
            return answer
        read_only = self.standby._check_this(standby=True)
        if read_only[0] != 200:
            return answer
        return _json(200, {**json.loads(read_only[2]), "reads_only": True})

    def _check_this(self, standby=False):
        # Never the breaker's probe, and never on a pooled connection: a check that times out closes its
        # connection (models/deadline.py), and on a database that answers slowly the pooled ones are those
        # that still answer. While the breaker is open (models/breaker.py) the answer is known without asking.
        if breaker.is_open(standby):
            return self._not_ready("the service cannot reach its database")
        timeout = self.config["PROBE_TIMEOUT_SECONDS"]
        # The timeout bounds the client's waits too, the connection's included: a database that accepts
        # connections and never answers is "not ready" within it.
        with deadline.within(timeout):
            return self._ask_ready(timeout)

    def _ask_ready(self, timeout):
        try:
            conn = self._connection()
            state = monitoring.schema_state(conn, timeout)
        except db.UndefinedTable:
            return self._not_ready("the database has no schema: run `flask --app app db init`")
        except db.DatabaseTimeout:
            if self._conn is None or self._conn.closed:  # the client's deadline gave the connection up
                return self._not_ready("the service cannot reach its database")
            return self._not_ready(f"the database did not answer within {timeout:g} s")
        except db.DatabaseUnavailable:
            if self._conn is not None:
                self._conn.close()  # in a state nothing can tell: made again at the next check
            return self._not_ready("the service cannot reach its database")
        finally:
            if self._conn is not None and self._conn.closed:
                self._conn = None
        problem = migrations.version_problem(state["applied"], state["newest"])
        if problem is not None:
            return self._not_ready(problem)
        return _json(200, {"status": "ready", "schema_version": state["newest"]})

    def _connection(self):
        # The readiness check's own connection, made again after a fork or once it was lost: one more per
        # process than DATABASE_POOL_SIZE (docs/operations.md).
        if self._conn is None or self._conn_pid != os.getpid():
            self._conn, self._conn_pid = db.connect(self.database), os.getpid()
            self._conn.autocommit = True
        return self._conn

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
