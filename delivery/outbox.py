"""The outbox's first step: render waiting events once and fan them out to the subscribed endpoints.

Used by the delivery loop (delivery/worker.py) and by `flask webhooks test` / `resend`, which
render the one event they need in their own transaction.
"""
import logging

from api.ids import PREFIXES, format_id
from delivery.render import Renderer
from models import events

log = logging.getLogger("delivery")

RENDER_BATCH = 50


def render_pending(conn, now, limit=RENDER_BATCH, event_ids=None):
    """Render and fan out up to `limit` waiting events in the caller's transaction; returns how many."""
    claimed = events.claim_unrendered(conn, limit, event_ids)
    renderer = Renderer(conn)
    rendered = []
    for event in claimed:
        try:
            rendered.append((event.id, *renderer.render(event)))
        except (ValueError, TypeError, KeyError, AttributeError):
            # A row the serialiser cannot handle must not stall every later event: skip it, loudly.
            log.exception("cannot render event event_id=%s type=%s; skipped",
                          format_id(PREFIXES["webhook_event"], event.id), event.type)
            rendered.append((event.id, None, None))
    events.store_rendered(conn, rendered, now)
    return len(claimed)
