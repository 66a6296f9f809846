"""The compiled dumper gives exactly what marshmallow's schema.dump gives."""
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest

from api.schemas.compiled import dumper
from api.schemas.organization import OrganizationSchema
from api.schemas.shipments import ShipmentSchema
from models import shipments
from tests.support.factories import make_container, make_label, make_org, make_shipment

NOW = datetime(2026, 11, 23, 4, 42, 19, 433217, tzinfo=timezone.utc)


def test_shipments_from_the_database_dump_identically(conn):
    org_id = make_org(conn, "acme")
    rich = make_shipment(conn, org_id, erp_reference="PO-1", transport_reference="msku 123-4565",
                         transport_type="ocean", cargo_type="reefer", temperature_celsius=Decimal("-1.50"),
                         status="in_transit", archived=True, eta=NOW, etd=NOW - timedelta(days=20),
                         origin_location="Valparaiso", origin_country="Chile", origin_timezone="-03:00",
                         consignor="Frutas del Sur", draft_produce=["Avocado"], notes="fragile")
    make_shipment(conn, org_id)
    make_container(conn, rich, number="MSKU1234565", eta=NOW, temperature_celsius=Decimal("4.00"))
    make_label(conn, org_id, "urgent", "red", [rich])
    items = shipments.list_shipments(conn, org_id, 10, archived=None)
    assert len(items) == 2
    schema = ShipmentSchema()
    assert [dumper(ShipmentSchema)(item) for item in items] == schema.dump(items, many=True)


@pytest.mark.parametrize("expires_at", [None, NOW])
def test_organization_dumps_identically(expires_at):
    organization = {"id": 7, "name": "Acme", "slug": "acme", "api_version": None,
                    "token": {"id": 3, "name": "ci", "scopes": ["read"], "expires_at": expires_at,
                              "user_email": "owner@acme.example"}}
    assert dumper(OrganizationSchema)(organization) == OrganizationSchema().dump(organization)
