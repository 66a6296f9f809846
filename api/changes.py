"""GET /changes: the change feed a mirror polls (docs/sync.md)."""
from flask import Blueprint

from api import responses, waiting
from api.apidoc import get_route
from api.context import get_conn, principal, version
from api.errors import InvalidParameter
from api.params import ChangeCursor, parse_query
from api.schemas.queries import ChangeListQuerySchema
from models import changes, db
from rendering import shipment_renderings
from rendering.present import dumps, present
from rendering.schemas.changes import ChangeListSchema
from rendering.schemas.shipments import DeletedShipmentSchema

bp = Blueprint("changes", __name__)

BEYOND_MESSAGE = ("since is ahead of every change this database has made: the cursor comes from another database "
                  "or from before a restore. Start again without since (or with since=0.0) and rebuild your copy.")
OTHER_HISTORY_MESSAGE = ("since was given in another history of this database (before a failover or a restore): "
                         "changes it counted may be lost and its position means nothing now. Start again without "
                         "since (or with since=0.0) and rebuild your copy.")


@get_route(bp, "/changes", ChangeListSchema, query=ChangeListQuerySchema, headers=waiting.POLL_HEADERS)
def list_changes():
    """Shipments changed since a cursor, oldest change first.

    Every shipment carries a `revision` that grows with each change to anything it shows (containers,
    labels, cargo, checks, tracking and the effective ETA included). This feed lists the shipments
    changed after `since`, each once at its current state, in the order of their latest change;
    shipments deleted or hidden since (awaiting approval, owned elsewhere) come as
    `{object, id, deleted: true, revision}`. Omit `since` to start from the beginning (every
    shipment), then pass `next_since` each time: while `has_more` is true, ask again at once.
    A cursor never expires; `0.0` starts from the beginning too. A cursor this database cannot
    have given (one from another database, or one given before a failover or a restore) is a 400
    `invalid_parameter` on `since`: start again from the beginning.

    No change is ever skipped, however writers' transactions interleave: a change becomes visible
    here only when every transaction that began writing before it has ended, so a change committed
    late is never behind the cursor (docs/sync.md). A poll with nothing new is one index lookup.

    With `wait`, a call with nothing new is held until a change of the organization can be listed or
    the wait ends, then answers what the same call without `wait` answers at that moment (an empty
    page with the same `next_since` at the end). `X-Poll-Interval` says how many seconds to wait
    before the next call: 0 after a page with changes or a held call, 10 after an empty page without
    `wait`, 5 when this instance holds as many calls as it can (the call is answered at once).
    """
    query = parse_query(ChangeListQuerySchema)
    waiting.still_allowed()
    since = query.get("since", ChangeCursor.START)
    organization_id, api_version = principal()["organization_id"], version()
    heard = waiting.before_reading("changes", organization_id)
    conn = get_conn()
    with db.one_snapshot(conn):
        try:
            page = changes.changes_after(conn, organization_id, since, query["limit"] + 1)
        except changes.CursorOfAnotherHistory:
            raise InvalidParameter(OTHER_HISTORY_MESSAGE, param="since") from None
        except changes.CursorBeyond:
            raise InvalidParameter(BEYOND_MESSAGE, param="since") from None
        visible = [shipment_id for _position, shipment_id, _revision, is_visible in page if is_visible]
        rows = (shipment_renderings.page(conn, organization_id, api_version, len(visible), shipment_ids=visible)
                if visible else [])
        made = shipment_renderings.render_missing(conn, organization_id, api_version, rows)
    shipment_renderings.store(conn, api_version, made)
    bodies_by_id = shipment_renderings.bodies_by_id(rows, made)
    has_more = len(page) > query["limit"]
    page = page[:query["limit"]]
    items = [bodies_by_id[shipment_id] if is_visible else
             dumps(present("deleted_shipment", DeletedShipmentSchema,
                           {"id": shipment_id, "revision": revision, "deleted": True}, api_version))
             for _position, shipment_id, revision, is_visible in page]
    # The shipments as stored, never parsed again; the envelope as ChangeListSchema orders it.
    response = responses.stored_list(items, has_more, next_since=ChangeCursor.format(page[-1][0] if page else since))
    return waiting.answer(response, "changes", organization_id, waiting.parse_wait(query), not page, heard)
