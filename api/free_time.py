"""GET /shipments/{shipment_id}/free_time and GET /free_time/at_risk."""
import hashlib
import threading
from datetime import datetime
from operator import itemgetter
from typing import NamedTuple

from cachetools import LRUCache
from flask import Blueprint

from api.apidoc import get_route
from api.context import get_conn, principal, version
from api.responses import missing, path_id, resource, stored_list
from api.schemas.common import list_schema
from models import free_time, free_time_queries
from rendering.present import dumps, present
from rendering.schemas.free_time import FreeTimeSummarySchema

bp = Blueprint("free_time", __name__)

# Bound on the summaries kept (about 200 bytes each, plus the JSON of the shipments at risk); past it the
# least recently used are dropped and made again as needed.
MAX_SUMMARIES = 30_000
# The at-risk list's summaries this process has written, by shipment id (docs/free-time.md, "Speed").
# An entry serves only the very facts it was made from (a digest of the facts text the reading statement
# returned), at the same version and window, while "today" is the same day at every offset of its events:
# a summary depends on nothing else, so a served entry is what the engine would answer now.
_summaries = LRUCache(maxsize=MAX_SUMMARIES)
# A cachetools cache is not safe for threads (a read reorders it): each request takes the lock twice, to
# read its candidates' entries and to store what it made, never while the engine runs.
_summaries_lock = threading.Lock()


class _Summary(NamedTuple):
    """What the list made of one candidate's facts, and when it may serve it again."""

    digest: bytes
    version: str
    window_days: int
    valid_from: datetime
    valid_until: datetime
    key: tuple | None  # the list's sort key when the shipment is listed, else None
    body: str | None   # the summary's JSON when listed


@get_route(bp, "/shipments/<shipment_id>/free_time", FreeTimeSummarySchema)
def get_shipment_free_time(shipment_id):
    """Demurrage and detention clocks of one shipment.

    Only ocean shipments have clocks: one of each kind per container with loading, discharge, gate-out
    or empty-return events. For other shipments both lists are empty and `active_clock` is null. A
    clock stays `not_started` until its container is discharged.
    """
    summary = free_time_queries.get_free_time(get_conn(), principal()["organization_id"],
                                              path_id(shipment_id, "shp", "shipment"))
    if summary is None:
        raise missing("shipment", shipment_id)
    return resource("free_time_summary", FreeTimeSummarySchema, summary)


@get_route(bp, "/free_time/at_risk", list_schema(FreeTimeSummarySchema, "FreeTimeSummaryList"))
def list_free_time_at_risk():
    """Shipments whose demurrage has 2 or fewer days left or is overdue, most urgent first, not paged.

    Only ocean shipments that are not archived, not yet in the warehouse and discharged in the last
    45 days are considered; shipments with unknown terms never appear. `has_more` is always false.
    """
    now = free_time_queries.utc_now()
    rows = free_time_queries.at_risk_candidates(get_conn(), principal()["organization_id"], now)
    return stored_list(at_risk_bodies(rows, now, version()), False)


def at_risk_bodies(rows, now, api_version, window_days=free_time.AT_RISK_WINDOW_DAYS):
    """The JSON of each listed summary among candidate rows (id, facts), most urgent first."""
    with _summaries_lock:
        kept = [_summaries.get(row["id"]) for row in rows]
    listed, made = [], {}
    for row, entry in zip(rows, kept):
        digest = hashlib.blake2b(row["facts"].encode(), digest_size=16).digest()
        if (entry is None or entry.digest != digest or entry.version != api_version or entry.window_days != window_days
                or not entry.valid_from <= now < entry.valid_until):
            entry = made[row["id"]] = _summarize(row["facts"], digest, now, api_version, window_days)
        if entry.key is not None:
            listed.append((entry.key, entry.body))
    if made:
        with _summaries_lock:
            _summaries.update(made)
    listed.sort(key=itemgetter(0))
    return [body for _key, body in listed]


def _summarize(facts_text, digest, now, api_version, window_days):
    """Run the engine on one candidate's facts: what to keep of it."""
    facts = free_time_queries.parse_facts(facts_text)
    valid_from, valid_until = free_time.same_days_span(
        now, [event["occurred_at_offset_minutes"] for event in facts[2]])
    key, body = None, None
    entry = free_time.at_risk_entry(*facts, now, window_days)
    if entry is not None:
        key, summary = entry
        body = dumps(present("free_time_summary", FreeTimeSummarySchema, summary, api_version))
    return _Summary(digest, api_version, window_days, valid_from, valid_until, key, body)
