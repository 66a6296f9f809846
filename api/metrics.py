"""The service's Prometheus metrics: request counts and durations, refusals, database errors, and gauges read
from the database when scraped.

Under gunicorn every worker writes its counts to files in PROMETHEUS_MULTIPROC_DIR (gunicorn.conf.py
makes it and empties it at start) and a scrape of any worker sums them all: prometheus_client's
multiprocess mode. A worker that dies leaves its files, still summed: its counts are kept until the
next start. No gauge lives in those files (the gauges are read from the database when scraped), so nothing
of a dead worker's is to be removed. Without it (the Flask test client, `flask run`) the counts are this
process's own.
"""
import logging
import os

from prometheus_client import values
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client import REGISTRY as PROCESS_REGISTRY
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector

from models import db, monitoring

log = logging.getLogger(__name__)

# The mode prometheus_client chose when first imported (PROMETHEUS_MULTIPROC_DIR set then or not): the
# counts are where that mode writes them, whatever the environment says later.
MULTIPROCESS = values.ValueClass is not values.MutexValue

# The one route label of a request that matched no URL rule: raw paths would give a series per probe.
UNMATCHED_ROUTE = "unmatched"
# Methods named as they are; any other method a client invents is one label, not a series each.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
OTHER_METHOD = "other"

REQUESTS = Counter("shiptrack_http_requests_total", "HTTP requests answered, by URL rule, method and status.",
                   ["route", "method", "status"])
# From a cached 304 to a page of 100 shipments on a cold cache, up to the 10 s limit.
DURATION = Histogram("shiptrack_http_request_duration_seconds", "Time to answer an HTTP request, by URL rule.",
                     ["route"], buckets=(0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0))
RATE_LIMIT_REFUSALS = Counter("shiptrack_rate_limit_refusals_total",
                              "Requests answered 429, by the limit they passed (per_token, per_ip, anonymous_per_ip).",
                              ["limit"])
# Counted by the gunicorn worker (serving.py): such a response was counted above, by its status, when it began.
RESPONSES_CUT = Counter("shiptrack_http_responses_cut_total",
                        "Responses whose connection was closed because the client had not read them by their "
                        "deadline, by URL rule.", ["route"])
DATABASE_ERRORS = Counter("shiptrack_database_errors_total",
                          "Requests that met a database error: unavailable or conflict (503), statement (500).",
                          ["kind"])

# (name, help) of the gauges read from the database at each scrape (models/monitoring.py).
_GAUGES = (
    ("deliveries_due", "shiptrack_webhook_deliveries_due", "Webhook deliveries due now and not yet attempted."),
    ("oldest_due_seconds", "shiptrack_webhook_oldest_due_seconds",
     "How long the oldest due webhook delivery has been waiting (0 when none is due)."),
    ("render_failures", "shiptrack_webhook_render_failures", "Events the serialiser could not render."),
    ("change_feed_lag_seconds", "shiptrack_change_feed_lag_seconds",
     "How long the oldest open writing transaction has held the change feed's horizon back (0 when none)."),
)


def method_label(method):
    """The method as a label value: a known method, else `other`."""
    return method if method in METHODS else OTHER_METHOD


# (route, method label, status) -> (its counter, its route's histogram): labels() validates and locks
# on every call, and the same few label sets recur on every request, so each is looked up once.
_CHILDREN = {}


def observe_request(route, method, status, seconds):
    """Count one answered request and its duration."""
    key = (route, method_label(method), status)
    children = _CHILDREN.get(key)
    if children is None:
        children = _CHILDREN[key] = (REQUESTS.labels(key[0], key[1], str(status)), DURATION.labels(route))
    children[0].inc()
    children[1].observe(seconds)


def refused_limit(rate_limit_header):
    """The policy a 429's RateLimit header names (`"per_token";r=0;t=12` -> per_token)."""
    name = (rate_limit_header or "").partition(";")[0].strip().strip('"')
    return name or "unknown"


class DatabaseGauges:
    """Reads the database gauges with one bounded statement when collected; none while it is unreachable."""

    def __init__(self, database, timeout_seconds):
        self.database = database
        self.timeout_seconds = timeout_seconds

    def collect(self):
        """The gauges, plus shiptrack_database_up (1 when the statement answered)."""
        readings = self._read()
        up = GaugeMetricFamily("shiptrack_database_up", "Whether this scrape's database statement answered.")
        up.add_metric([], 0 if readings is None else 1)
        yield up
        if readings is None:
            return
        for key, name, description in _GAUGES:
            gauge = GaugeMetricFamily(name, description)
            gauge.add_metric([], float(readings[key]))
            yield gauge

    def _read(self):
        try:
            conn = db.checkout(self.database)
        except db.DatabaseUnavailable as error:
            log.warning("metrics: database unreachable: %s", error)
            return None
        try:
            conn.autocommit = True
            return monitoring.gauges(conn, self.timeout_seconds)
        except (db.DatabaseUnavailable, db.Error) as error:
            log.warning("metrics: the gauges' statement failed: %s", db.describe(error))
            return None
        finally:
            db.checkin(conn)  # a lost one is closed already, or found dead at its next checkout


class _Process:
    """This process's own metrics, when not in multiprocess mode."""

    def collect(self):
        """Every metric of prometheus_client's default registry."""
        return PROCESS_REGISTRY.collect()


def exposition(database, timeout_seconds):
    """The text exposition of every metric: every worker's counts and the database gauges, read now."""
    registry = CollectorRegistry()
    if MULTIPROCESS:
        MultiProcessCollector(registry, os.environ["PROMETHEUS_MULTIPROC_DIR"])
    else:
        registry.register(_Process())
    registry.register(DatabaseGauges(database, timeout_seconds))
    return generate_latest(registry)
