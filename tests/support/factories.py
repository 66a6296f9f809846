"""Build rows for tests with plain SQL; each function returns the new row's id (or token value)."""
from models import organizations, tokens


def _insert(conn, table, values):
    columns = ", ".join(values)
    placeholders = ", ".join(f"%({name})s" for name in values)
    with conn.cursor() as cur:
        cur.execute(f"INSERT INTO {table} ({columns}) VALUES ({placeholders}) RETURNING id", values)
        return cur.fetchone()["id"]


def make_org(conn, slug="acme", name=None):
    """An organization with an owner, an admin and a member (`<role>@<slug>.example`)."""
    org = organizations.create_organization(conn, name or slug.title(), slug)
    for role in organizations.ROLES:
        user = organizations.ensure_user(conn, f"{role}@{slug}.example")
        organizations.add_member(conn, org["id"], user["id"], role)
    return org["id"]


def make_token(conn, organization_id, email=None, name="test token", expires="never"):
    """A token value for a member (the organization's owner by default)."""
    with conn.cursor() as cur:
        cur.execute("SELECT slug FROM organizations WHERE id = %s", (organization_id,))
        slug = cur.fetchone()["slug"]
    member = organizations.get_membership(conn, organization_id, email or f"owner@{slug}.example")
    value, _row = tokens.create_token(conn, organization_id, member["user_id"], name, expires)
    return value


def auth(token, **headers):
    """Request headers carrying a bearer token."""
    return {"Authorization": f"Bearer {token}", **headers}


def make_shipment(conn, organization_id, **values):
    """A shipment; any column may be given."""
    return _insert(conn, "shipments", {"organization_id": organization_id, **values})


def make_container(conn, shipment_id, **values):
    """A container of a shipment."""
    with conn.cursor() as cur:
        cur.execute("SELECT organization_id FROM shipments WHERE id = %s", (shipment_id,))
        organization_id = cur.fetchone()["organization_id"]
    return _insert(conn, "containers", {"organization_id": organization_id, "shipment_id": shipment_id, **values})


def make_label(conn, organization_id, name, color=None, shipment_ids=()):
    """A label, attached to the given shipments."""
    label_id = _insert(conn, "labels", {"organization_id": organization_id, "name": name, "color": color})
    with conn.cursor() as cur:
        for shipment_id in shipment_ids:
            cur.execute("INSERT INTO shipment_labels (shipment_id, label_id) VALUES (%s, %s)",
                        (shipment_id, label_id))
    return label_id


def insert(conn, table, **values):
    """Any row of any table."""
    return _insert(conn, table, values)
