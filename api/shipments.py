"""GET /shipments and GET /shipments/{shipment_id}: stored renderings served as bytes, made on a miss."""
from flask import Blueprint

from api import shipment_renderings
from api.apidoc import get_route
from api.context import get_conn, principal, version
from api.params import parse_query
from api.responses import missing, path_id, stored, stored_listing
from api.schemas.common import list_schema
from api.schemas.queries import ShipmentListQuerySchema
from api.schemas.shipments import ShipmentSchema
from models import db

bp = Blueprint("shipments", __name__)

_ARCHIVED = {"false": False, "true": True, "any": None}


@get_route(bp, "/shipments", list_schema(ShipmentSchema, "ShipmentList"), query=ShipmentListQuerySchema)
def list_shipments():
    """Shipments, newest first, keyset-paged.

    Shipments waiting for approval are never listed; archived ones only with `archived=true` or `any`.
    Filters combine with AND. Page with `limit` and `starting_after`, the last id of the previous page,
    while `has_more` is true: shipments added meanwhile cause no gaps or repeats.
    """
    query = parse_query(ShipmentListQuerySchema)
    shipment_json = shipment_bodies(
        query["limit"] + 1,
        q=query.get("q"), statuses=query.get("status"), label_ids=query.get("labels"),
        archived=_ARCHIVED[query["archived"]],
        created_after=query.get("created_after"), created_before=query.get("created_before"),
        eta_after=query.get("eta_after"), eta_before=query.get("eta_before"),
        starting_after=query.get("starting_after"))
    return stored_listing(shipment_json, query["limit"])


@get_route(bp, "/shipments/<shipment_id>", ShipmentSchema)
def get_shipment(shipment_id):
    """One shipment (archived ones included).

    A shipment waiting for approval or of another organization is a 404, like a missing one.
    """
    shipment_json = shipment_bodies(1, shipment_id=path_id(shipment_id, "shp", "shipment"))
    if not shipment_json:
        raise missing("shipment", shipment_id)
    return stored(shipment_json[0])


def shipment_bodies(limit, **filters):
    """The JSON of up to `limit` visible shipments, newest first, at the request's version.

    Each is read as stored when its rendering is current (same revision, version and renderer,
    checked in the statement that reads it); the others are rendered from one snapshot, served, and
    stored for the next read.
    """
    conn, organization_id, api_version = get_conn(), principal()["organization_id"], version()
    rows = shipment_renderings.page(conn, organization_id, api_version, limit, **filters)
    made = {}
    if any(body is None for _shipment_id, body in rows):
        with db.one_snapshot(conn):
            made = shipment_renderings.render_missing(conn, organization_id, api_version, rows)
        shipment_renderings.store(conn, api_version, made)
    bodies_by_id = shipment_renderings.bodies_by_id(rows, made)
    # A shipment hidden or deleted between the two reads is left out, as a read after it would.
    return [bodies_by_id[shipment_id] for shipment_id, _body in rows if shipment_id in bodies_by_id]
