"""receiving-webhooks.md's events poller, as written there, under real gunicorn: each event once, as it is made
(held with `wait` until it is rendered), a clean stop, and a start again that goes on from its file."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.support import ROOT
from tests.support.factories import make_org, make_shipment, make_token
from tests.support.processes import gunicorn, wait_for

LONG = 50        # the poller's wait is 60: an answer long before it was woken


@pytest.fixture
def org(conn):
    org_id = make_org(conn, "acme")
    return {"id": org_id, "token": make_token(conn, org_id)}


def sql(conn, statement, *args):
    with conn.cursor() as cur:
        cur.execute(statement, args)


def documented_events_poller():
    text = (ROOT / "docs" / "receiving-webhooks.md").read_text()
    section = text.split("## Polling instead of receiving", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def render_event(conn, org_id, shipment):
    """An alert.created event of `shipment`, rendered as the outbox renders one; its id."""
    with conn.cursor() as cur:
        cur.execute("INSERT INTO events (organization_id, type, shipment_id) VALUES (%s, 'alert.created', %s) "
                    "RETURNING id", (org_id, shipment))
        event_id = cur.fetchone()["id"]
    body = json.dumps({"id": f"msg_{event_id}", "type": "alert.created"})
    sql(conn, "UPDATE events SET state = 'rendered', body = %s, api_version = '2026-10-01', rendered_at = now() "
              "WHERE id = %s", body, event_id)
    return event_id


@pytest.mark.slow
def test_the_documented_events_poller_sees_each_event_once_and_stops_cleanly(conn, org, database_url, tmp_path):
    shipment = make_shipment(conn, org["id"])
    first = render_event(conn, org["id"], shipment)
    (tmp_path / "events.py").write_text(documented_events_poller())
    with gunicorn(database_url, tmp_path) as base:
        env = {**os.environ, "SHIPTRACK_URL": base, "SHIPTRACK_TOKEN": org["token"]}
        poller = subprocess.Popen([sys.executable, "events.py"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        try:
            assert poller.stdout.readline() == f"alert.created msg_{first}\n"
            time.sleep(1.0)  # its call with wait is held
            second = render_event(conn, org["id"], shipment)
            started = time.monotonic()
            assert poller.stdout.readline() == f"alert.created msg_{second}\n"
            assert time.monotonic() - started < LONG / 2    # woken, not polled
            # Handled, then noted: an event handled but not yet noted would be handled again after a stop.
            assert wait_for(lambda: f"msg_{second}" in (tmp_path / "events.json").read_text(), 10)
        finally:
            poller.send_signal(signal.SIGTERM)
            out, err = poller.communicate(timeout=60)
        assert (poller.returncode, out, err) == (0, "stopped; events.json keeps what was handled\n", "")
        # Started again, it goes on: only what is new.
        third = render_event(conn, org["id"], shipment)
        poller = subprocess.Popen([sys.executable, "events.py"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                  text=True)
        try:
            assert poller.stdout.readline() == f"alert.created msg_{third}\n"
            assert wait_for(lambda: f"msg_{third}" in (tmp_path / "events.json").read_text(), 10)
        finally:
            poller.send_signal(signal.SIGINT)
            poller.communicate(timeout=60)
    assert json.loads((tmp_path / "events.json").read_text()) == [f"msg_{first}", f"msg_{second}", f"msg_{third}"]
