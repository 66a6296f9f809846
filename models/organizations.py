"""Organizations, users and memberships."""
from models.db import execute_all, execute_one

ROLES = ("member", "admin", "owner")

# pin_version: an organization without a pin gets `version`; one already pinned keeps its own.
_PIN_VERSION_SQL = """
UPDATE organizations SET api_version = coalesce(api_version, %(version)s)
 WHERE id = %(id)s
RETURNING api_version
"""

# lock_pinned_version: `orgs pin-version` reads the pin and holds the row while it decides.
_LOCK_PINNED_VERSION_SQL = "SELECT api_version FROM organizations WHERE id = %(id)s FOR UPDATE"

# move_pinned_version: `orgs pin-version` moves the pin forward.
_MOVE_PINNED_VERSION_SQL = """
UPDATE organizations SET api_version = %(version)s WHERE id = %(id)s RETURNING api_version
"""

# create_organization: `orgs create`.
_CREATE_ORGANIZATION_SQL = """
INSERT INTO organizations (name, slug) VALUES (%(name)s, %(slug)s)
RETURNING id, name, slug, api_version, created_at
"""

# get_organization_by_slug: the CLI names an organization by its slug.
_GET_ORGANIZATION_BY_SLUG_SQL = "SELECT id, name, slug, api_version FROM organizations WHERE slug = %(slug)s"

# get_organization: the CLI checks who may manage an endpoint's or event's organization.
_GET_ORGANIZATION_SQL = "SELECT id, name, slug, api_version FROM organizations WHERE id = %(id)s"

# list_organizations: `orgs list`.
_LIST_ORGANIZATIONS_SQL = "SELECT id, name, slug, api_version, created_at FROM organizations ORDER BY id"

# ensure_user: e-mails match case-insensitively (users_email_key); a name given replaces the stored one.
_ENSURE_USER_SQL = """
INSERT INTO users (email, name) VALUES (%(email)s, %(name)s)
ON CONFLICT (lower(email)) DO UPDATE SET name = coalesce(EXCLUDED.name, users.name)
RETURNING id, email, name
"""

# add_member: a removed member re-added gets the new role and is current again.
_ADD_MEMBER_SQL = """
INSERT INTO memberships (organization_id, user_id, role) VALUES (%(org)s, %(user)s, %(role)s)
ON CONFLICT (organization_id, user_id)
DO UPDATE SET role = EXCLUDED.role, removed_at = NULL
RETURNING id, role, removed_at
"""

# remove_member: the trigger memberships_revoke_tokens (schema.sql) revokes the member's tokens.
_REMOVE_MEMBER_SQL = """
UPDATE memberships SET removed_at = coalesce(removed_at, now())
 WHERE organization_id = %(org)s AND user_id = %(user)s
RETURNING id, removed_at
"""

# get_membership: a current member of an organization, by e-mail in any case.
_GET_MEMBERSHIP_SQL = """
SELECT u.id AS user_id, u.email, m.role FROM memberships m JOIN users u ON u.id = m.user_id
 WHERE m.organization_id = %(org)s AND lower(u.email) = lower(%(email)s)
   AND m.removed_at IS NULL
"""

# list_members: `orgs members list`, removed members included.
_LIST_MEMBERS_SQL = """
SELECT u.email, u.name, m.role, m.created_at, m.removed_at
  FROM memberships m JOIN users u ON u.id = m.user_id
 WHERE m.organization_id = %(org)s ORDER BY m.id
"""


def pin_version(conn, organization_id, version):
    """Pin the organization to `version` unless already pinned; returns the pinned version."""
    return execute_one(conn, _PIN_VERSION_SQL, {"id": organization_id, "version": version})["api_version"]


def lock_pinned_version(conn, organization_id):
    """The organization's pinned version (None when never pinned), its row locked until the transaction ends."""
    return execute_one(conn, _LOCK_PINNED_VERSION_SQL, {"id": organization_id})["api_version"]


def move_pinned_version(conn, organization_id, version):
    """Set the organization's pin to `version` (the caller checked it moves forward); returns the new pin."""
    return execute_one(conn, _MOVE_PINNED_VERSION_SQL, {"id": organization_id, "version": version})["api_version"]


def create_organization(conn, name, slug):
    """Create an organization; returns its row."""
    return execute_one(conn, _CREATE_ORGANIZATION_SQL, {"name": name, "slug": slug})


def get_organization_by_slug(conn, slug):
    """An organization by slug, or None."""
    return execute_one(conn, _GET_ORGANIZATION_BY_SLUG_SQL, {"slug": slug})


def get_organization(conn, organization_id):
    """An organization by id, or None (the CLI checks who may manage an endpoint's or event's organization)."""
    return execute_one(conn, _GET_ORGANIZATION_SQL, {"id": organization_id})


def list_organizations(conn):
    """Every organization, oldest first."""
    return execute_all(conn, _LIST_ORGANIZATIONS_SQL)


def ensure_user(conn, email, name=None):
    """The user with this e-mail (case-insensitive), created when missing; returns its row."""
    return execute_one(conn, _ENSURE_USER_SQL, {"email": email, "name": name})


def add_member(conn, organization_id, user_id, role):
    """Add (or re-add) a member with a role; returns the membership row."""
    return execute_one(conn, _ADD_MEMBER_SQL, {"org": organization_id, "user": user_id, "role": role})


def remove_member(conn, organization_id, user_id):
    """Mark a member removed; their tokens are revoked at once (by a trigger). Returns the row or None."""
    # The trigger memberships_revoke_tokens (schema.sql) revokes their tokens, for every writer:
    # revoked, not just suspended, so re-adding the person later does not bring them back.
    return execute_one(conn, _REMOVE_MEMBER_SQL, {"org": organization_id, "user": user_id})


def get_membership(conn, organization_id, email):
    """The current membership (user id, e-mail, role) of an e-mail in an organization, or None."""
    return execute_one(conn, _GET_MEMBERSHIP_SQL, {"org": organization_id, "email": email})


def list_members(conn, organization_id):
    """Members of an organization, including removed ones, oldest first."""
    return execute_all(conn, _LIST_MEMBERS_SQL, {"org": organization_id})
