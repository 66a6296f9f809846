"""The delivery process's Prometheus metrics, served on DELIVERY_METRICS_PORT when it is set (off by default).

Each delivery process serves its own counts (no multiprocess folder: one process, one port); the
web instances' /metrics carries the backlog gauges read from the database (api/metrics.py).
"""
import logging

from prometheus_client import Counter, Histogram, start_http_server

log = logging.getLogger("delivery")

ATTEMPTS = Counter("shiptrack_webhook_attempts_total",
                   "Webhook attempts finished, by outcome: succeeded, http_error (the receiver answered other "
                   "than 2xx), no_response (refused, timed out, TLS or address refused), crashed (a bug).",
                   ["outcome"])
# A receiver has 15 s in all (docs/webhooks.md); most answer in tens of milliseconds.
ATTEMPT_DURATION = Histogram("shiptrack_webhook_attempt_duration_seconds",
                             "Time from sending a webhook to its answer (or giving up on it).",
                             buckets=(0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0))


def serve(config):
    """Start the metrics server in a daemon thread when DELIVERY_METRICS_PORT is set; returns the port or None."""
    port = config["DELIVERY_METRICS_PORT"]
    if port is None:
        return None
    server, _thread = start_http_server(int(port), addr=config["DELIVERY_METRICS_HOST"])
    port = server.server_address[1]
    log.info("metrics served on http://%s:%s/metrics", config["DELIVERY_METRICS_HOST"], port)
    return port


def outcome_of(result):
    """The outcome label of a delivery.attempts.Result (None when the sender crashed)."""
    if result is None:
        return "crashed"
    if result.outcome.succeeded:
        return "succeeded"
    return "http_error" if result.outcome.status_code is not None else "no_response"


def observe_attempt(result):
    """Count one finished attempt and its duration."""
    ATTEMPTS.labels(outcome_of(result)).inc()
    if result is not None:
        ATTEMPT_DURATION.observe(result.outcome.duration_ms / 1000)
