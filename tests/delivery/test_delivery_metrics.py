"""The delivery script's own metrics (DELIVERY_METRICS_PORT), its JSON log lines and their fields; the CLI's."""
import json
import logging
import os
import signal
import subprocess
import sys
from datetime import datetime, timezone

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

import logs
from delivery import sender
from delivery.outbox import render_pending
from delivery.sender import Result
from delivery.sender import Outcome
from rendering.ids import PREFIXES, format_id
from tests.support import ROOT
from tests.support.factories import make_org, make_shipment
from tests.support.processes import free_port, wait_for
from tests.support.webhooks import add_endpoint, claimed_delivery, pass_process, run_pass


@pytest.mark.parametrize("outcome, label", [
    (Outcome(True, 200, None, "", "127.0.0.1", 12), "succeeded"),
    (Outcome(False, 500, "HTTP 500", "", "127.0.0.1", 12), "http_error"),
    (Outcome(False, None, "connection refused", None, "127.0.0.1", 3), "no_response"),
    (None, "crashed"),
])
def test_outcome_labels(outcome, label):
    result = None if outcome is None else Result(claimed_delivery("https://x.test/", "whsec_eA=="), None, None, outcome)
    assert sender.outcome_of(result) == label


def attempts(port):
    """{outcome: count} and the duration histogram's count, from the delivery process's /metrics."""
    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    found, durations = {}, 0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "shiptrack_webhook_attempts_total":
                found[sample.labels["outcome"]] = sample.value
            if sample.name == "shiptrack_webhook_attempt_duration_seconds_count":
                durations = sample.value
    return found, durations


@pytest.mark.slow
def test_the_delivery_process_serves_its_attempts_and_logs_json(conn, database_url, receiver, ca_bundle):
    org = make_org(conn, "acme")
    shipment = make_shipment(conn, org)
    add_endpoint(conn, org, receiver.url("/ok", host="127.0.0.1"))
    add_endpoint(conn, org, receiver.url("/status/500", host="127.0.0.1"))
    port = free_port()
    with pass_process(database_url, ca_bundle, "--watch", DELIVERY_METRICS_PORT=port, LOG_FORMAT="json") as process:
        try:
            def serving():
                try:
                    return attempts(port)
                except requests.ConnectionError:
                    return None

            assert wait_for(serving, 30)
            with conn.cursor() as cur:
                cur.execute("UPDATE shipments SET status = 'validated' WHERE id = %s", (shipment,))
            assert wait_for(lambda: attempts(port)[0] == {"succeeded": 1.0, "http_error": 1.0}, 30), attempts(port)
            assert attempts(port)[1] == 2
        finally:
            process.send_signal(signal.SIGTERM)
            output = process.communicate(timeout=30)[0].decode()
    assert process.returncode == 0, output
    lines = [json.loads(line) for line in output.splitlines()]
    assert any(line["message"] == f"metrics served on http://127.0.0.1:{port}/metrics" for line in lines)
    assert {line["logger"] for line in lines} >= {"delivery"}


def test_the_cli_and_the_api_log_json_lines_when_asked(database_url):
    env = {**os.environ, "DATABASE_URL": database_url, "SHIPTRACK_LOG_FORMAT": "json"}
    script = "from app import create_app; create_app(); import logging; logging.getLogger('cli').warning('one %s', 1)"
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    [line] = [json.loads(text) for text in result.stderr.splitlines()]
    assert {key: line[key] for key in ("level", "logger", "message")} == {"level": "WARNING", "logger": "cli",
                                                                          "message": "one 1"}


def test_delivery_lines_carry_the_event_the_endpoint_and_the_attempt_as_json_fields(conn, receiver, settings, caplog):
    org = make_org(conn, "acme")
    ok = add_endpoint(conn, org, receiver.url("/ok", host="127.0.0.1"))
    retried = add_endpoint(conn, org, receiver.url("/status/500", host="127.0.0.1"))
    abandoned = add_endpoint(conn, org, receiver.url("/status/503", host="127.0.0.1"))
    make_shipment(conn, org)
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'in_transit'")
    render_pending(conn, datetime.now(timezone.utc))
    with conn.cursor() as cur:  # its last attempt: the failure abandons it
        cur.execute("UPDATE webhook_deliveries SET max_attempts = 1 WHERE endpoint_id = %s", (abandoned["id"],))
    caplog.set_level(logging.DEBUG, "delivery")
    run_pass(settings, seconds=0.5)
    json_format, text_format = logs.make_formatter("json"), logs.make_formatter("text")
    lines = {record.getMessage().split(" event_id=")[0]: record for record in caplog.records
             if " event_id=" in record.getMessage()}
    assert sorted(lines) == ["delivered", "delivery abandoned", "delivery failed, retrying"]

    def fields(message):
        line = json.loads(json_format.format(lines[message]))
        return {key: line[key] for key in ("level", "event_id", "endpoint_id", "attempt", "status_code")}
    assert fields("delivered") == {"level": "DEBUG", "event_id": "msg_1", "endpoint_id": public(ok),
                                   "attempt": 1, "status_code": 200}
    assert fields("delivery failed, retrying") == {"level": "INFO", "event_id": "msg_1",
                                                   "endpoint_id": public(retried), "attempt": 1, "status_code": 500}
    assert fields("delivery abandoned") == {"level": "ERROR", "event_id": "msg_1", "endpoint_id": public(abandoned),
                                            "attempt": 1, "status_code": 503}
    assert json.loads(json_format.format(lines["delivery abandoned"]))["error"] == "HTTP 503"
    # The text line still says them in its message.
    assert f"delivery abandoned event_id=msg_1 endpoint_id={public(abandoned)} attempt=1 " in \
        text_format.format(lines["delivery abandoned"])


def public(endpoint):
    """An endpoint's public id."""
    return format_id(PREFIXES["webhook_endpoint"], endpoint["id"])
