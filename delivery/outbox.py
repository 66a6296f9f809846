"""The outbox's first step: render waiting events once and fan them out to the subscribed endpoints.

Used by the delivery loop (delivery/worker.py) and by `flask webhooks test` / `resend` /
`retry-render`, which render the events they need in their own transaction.
"""
import logging

import psycopg2

from api.ids import PREFIXES, format_id
from delivery.event_rendering import Renderer
from models import events

log = logging.getLogger("delivery")

RENDER_BATCH = 50


def render_pending(conn, now, limit=RENDER_BATCH, event_ids=None):
    """Render and fan out up to `limit` waiting events in the caller's transaction; returns how many."""
    claimed = events.claim_unrendered(conn, limit, event_ids)
    if not claimed:
        return 0
    with conn.cursor() as cur:
        # The bytes stored now are what every endpoint and every retry gets under this event's id:
        # this commit must survive a database crash, or the event is rendered again (other bytes,
        # same webhook-id) after a receiver may already have had the first ones.
        cur.execute("SET LOCAL synchronous_commit = on")
    renderer = Renderer(conn)
    try:
        renderer.prefetch(claimed)
    except psycopg2.Error:
        raise
    except Exception:  # a serialiser bug in one shipment: each event is rendered alone below, and fails alone
        log.exception("cannot render the batch's shipments together; rendering event by event")
        renderer = Renderer(conn)
    rendered = []
    for event in claimed:
        try:
            rendered.append((event.id, *renderer.render(event), None))
        except psycopg2.Error:
            raise  # the database's trouble (a lost connection), not the event's
        except Exception as error:  # recorded as render_failed, listed and retried by the CLI
            # A serialiser bug must not stall every later event, nor drop this one silently.
            log.exception("cannot render event event_id=%s type=%s; render_failed",
                          format_id(PREFIXES["webhook_event"], event.id), event.type)
            rendered.append((event.id, None, None, f"{type(error).__name__}: {error}"[:2000]))
    events.store_rendered(conn, rendered, now)
    return len(claimed)
