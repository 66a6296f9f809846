"""Organizations, users and memberships."""

ROLES = ("member", "admin", "owner")


def pin_version(conn, organization_id, version):
    """Pin the organization to `version` unless already pinned; returns the pinned version."""
    with conn.cursor() as cur:
        cur.execute("UPDATE organizations SET api_version = coalesce(api_version, %(version)s) "
                    "WHERE id = %(id)s RETURNING api_version", {"id": organization_id, "version": version})
        return cur.fetchone()["api_version"]


def lock_pinned_version(conn, organization_id):
    """The organization's pinned version (None when never pinned), its row locked until the transaction ends."""
    with conn.cursor() as cur:
        cur.execute("SELECT api_version FROM organizations WHERE id = %(id)s FOR UPDATE", {"id": organization_id})
        return cur.fetchone()["api_version"]


def move_pinned_version(conn, organization_id, version):
    """Set the organization's pin to `version` (the caller checked it moves forward); returns the new pin."""
    with conn.cursor() as cur:
        cur.execute("UPDATE organizations SET api_version = %(version)s WHERE id = %(id)s RETURNING api_version",
                    {"id": organization_id, "version": version})
        return cur.fetchone()["api_version"]


def create_organization(conn, name, slug):
    """Create an organization; returns its row."""
    with conn.cursor() as cur:
        cur.execute("INSERT INTO organizations (name, slug) VALUES (%(name)s, %(slug)s) "
                    "RETURNING id, name, slug, api_version, created_at", {"name": name, "slug": slug})
        return cur.fetchone()


def get_organization_by_slug(conn, slug):
    """An organization by slug, or None."""
    with conn.cursor() as cur:
        cur.execute("SELECT id, name, slug, api_version FROM organizations WHERE slug = %(slug)s",
                    {"slug": slug})
        return cur.fetchone()


def get_organization(conn, organization_id):
    """An organization by id, or None (the CLI checks who may manage an endpoint's or event's organization)."""
    with conn.cursor() as cur:
        cur.execute("SELECT id, name, slug, api_version FROM organizations WHERE id = %(id)s",
                    {"id": organization_id})
        return cur.fetchone()


def list_organizations(conn):
    """Every organization, oldest first."""
    with conn.cursor() as cur:
        cur.execute("SELECT id, name, slug, api_version, created_at FROM organizations ORDER BY id")
        return cur.fetchall()


def ensure_user(conn, email, name=None):
    """The user with this e-mail (case-insensitive), created when missing; returns its row."""
    with conn.cursor() as cur:
        cur.execute("INSERT INTO users (email, name) VALUES (%(email)s, %(name)s) "
                    "ON CONFLICT (lower(email)) DO UPDATE SET name = coalesce(EXCLUDED.name, users.name) "
                    "RETURNING id, email, name", {"email": email, "name": name})
        return cur.fetchone()


def add_member(conn, organization_id, user_id, role):
    """Add (or re-add) a member with a role; returns the membership row."""
    with conn.cursor() as cur:
        cur.execute("""
            INSERT INTO memberships (organization_id, user_id, role) VALUES (%(org)s, %(user)s, %(role)s)
            ON CONFLICT (organization_id, user_id)
            DO UPDATE SET role = EXCLUDED.role, removed_at = NULL
            RETURNING id, role, removed_at""", {"org": organization_id, "user": user_id, "role": role})
        return cur.fetchone()


def remove_member(conn, organization_id, user_id):
    """Mark a member removed; their tokens are revoked at once (by a trigger). Returns the row or None."""
    with conn.cursor() as cur:
        cur.execute("UPDATE memberships SET removed_at = coalesce(removed_at, now()) "
                    "WHERE organization_id = %(org)s AND user_id = %(user)s RETURNING id, removed_at",
                    {"org": organization_id, "user": user_id})
        # The trigger memberships_revoke_tokens (schema.sql) revokes their tokens, for every writer:
        # revoked, not just suspended, so re-adding the person later does not bring them back.
        return cur.fetchone()


def get_membership(conn, organization_id, email):
    """The current membership (user id, e-mail, role) of an e-mail in an organization, or None."""
    with conn.cursor() as cur:
        cur.execute("""
            SELECT u.id AS user_id, u.email, m.role FROM memberships m JOIN users u ON u.id = m.user_id
             WHERE m.organization_id = %(org)s AND lower(u.email) = lower(%(email)s)
               AND m.removed_at IS NULL""", {"org": organization_id, "email": email})
        return cur.fetchone()


def list_members(conn, organization_id):
    """Members of an organization, including removed ones, oldest first."""
    with conn.cursor() as cur:
        cur.execute("""
            SELECT u.email, u.name, m.role, m.created_at, m.removed_at
              FROM memberships m JOIN users u ON u.id = m.user_id
             WHERE m.organization_id = %(org)s ORDER BY m.id""", {"org": organization_id})
        return cur.fetchall()
