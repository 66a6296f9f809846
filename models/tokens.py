"""API tokens: `sv_` + 40 letters and digits; only a SHA-256 fingerprint is stored."""
import hashlib
import re
import secrets
import string

from models import db

TOKEN_PATTERN = re.compile(r"sv_[A-Za-z0-9]{40}", re.ASCII)
MAX_ACTIVE_TOKENS = 10
EXPIRIES = {"30d": "30 days", "90d": "90 days", "1y": "1 year", "never": None}
_ALPHABET = string.ascii_letters + string.digits


class TokenLimitReached(Exception):
    """The organization already has the maximum of active tokens."""


def generate_token():
    """A new token value from the operating system's CSPRNG."""
    return "sv_" + "".join(secrets.choice(_ALPHABET) for _ in range(40))


def fingerprint(token):
    """The stored form of a token value."""
    return hashlib.sha256(token.encode("ascii")).digest()


# principal: the active token with this fingerprint, its user (still a member) and organization; no row
# for any other. The lookup is the function token_principal of schema.sql, which holds the rule of an active
# token; the API keeps what it answers per process (models/principals.py).
PRINCIPAL_SQL = "SELECT * FROM token_principal(%(fingerprint)s)"


def principal(conn, fingerprint):
    """The principal of a token fingerprint (a dict of token_principal's columns), or None."""
    return db.execute_one(conn, PRINCIPAL_SQL, {"fingerprint": fingerprint})


# create_token: lock the organization row so two creations cannot both pass the limit.
_LOCK_ORG_SQL = "SELECT id FROM organizations WHERE id = %(organization_id)s FOR UPDATE"
# create_token: count of active tokens (expired and revoked ones, and those of removed members, do not count).
_ACTIVE_COUNT_SQL = """
SELECT count(*) AS active FROM tokens t
  JOIN memberships m ON m.organization_id = t.organization_id AND m.user_id = t.user_id
 WHERE t.organization_id = %(organization_id)s AND token_state(t, m) = 'active'
"""
# create_token: the token's fingerprint, never its value.
_INSERT_SQL = """
INSERT INTO tokens (organization_id, user_id, name, fingerprint, expires_at)
VALUES (%(organization_id)s, %(user_id)s, %(name)s, %(fingerprint)s,
        now() + %(expires_in)s::interval)
RETURNING id, expires_at
"""


def create_token(conn, organization_id, user_id, name, expires):
    """Create a token; returns (value, row). The value is never stored."""
    db.execute(conn, _LOCK_ORG_SQL, {"organization_id": organization_id})
    if db.execute_one(conn, _ACTIVE_COUNT_SQL, {"organization_id": organization_id})["active"] >= MAX_ACTIVE_TOKENS:
        raise TokenLimitReached(f"the organization already has {MAX_ACTIVE_TOKENS} active tokens")
    value = generate_token()
    return value, db.execute_one(conn, _INSERT_SQL, {"organization_id": organization_id, "user_id": user_id,
                                                     "name": name, "fingerprint": fingerprint(value),
                                                     "expires_in": EXPIRIES[expires]})


# tokens list: every token of an organization with its owner and state (schema.sql token_state; a removed
# member's tokens are also revoked, by memberships_revoke_tokens).
_LIST_SQL = """
SELECT t.id, t.name, u.email AS user_email, t.created_at, t.expires_at, t.revoked_at, token_state(t, m) AS state
  FROM tokens t JOIN users u ON u.id = t.user_id
  JOIN memberships m ON m.organization_id = t.organization_id AND m.user_id = t.user_id
 WHERE t.organization_id = %(organization_id)s
   AND (%(user_id)s::bigint IS NULL OR t.user_id = %(user_id)s)
 ORDER BY t.id
"""


def list_tokens(conn, organization_id, user_id=None):
    """Tokens of an organization (of one user when given), oldest first."""
    return db.execute_all(conn, _LIST_SQL, {"organization_id": organization_id, "user_id": user_id})


# get_token: one token by id, whatever its organization (the CLI checks the actor's rights).
_GET_SQL = "SELECT id, organization_id, user_id, revoked_at FROM tokens WHERE id = %(id)s"

# revoke_token: returns the organization and user so the caller can check the actor's rights.
_REVOKE_SQL = """
UPDATE tokens SET revoked_at = coalesce(revoked_at, now())
 WHERE id = %(token_id)s
RETURNING id, organization_id, user_id
"""


def get_token(conn, token_id):
    """One token row by id, or None."""
    return db.execute_one(conn, _GET_SQL, {"id": token_id})


def revoke_token(conn, token_id):
    """Revoke a token (idempotent); returns its row or None."""
    return db.execute_one(conn, _REVOKE_SQL, {"token_id": token_id})


# revoke_named: a lost token is revoked and replaced; this revokes a user's tokens of one name.
_REVOKE_NAMED_SQL = """
UPDATE tokens SET revoked_at = now()
 WHERE organization_id = %(organization_id)s AND user_id = %(user_id)s AND name = %(name)s
   AND revoked_at IS NULL
"""


def revoke_named(conn, organization_id, user_id, name):
    """Revoke a user's active tokens with this name; returns how many."""
    return db.execute(conn, _REVOKE_NAMED_SQL, {"organization_id": organization_id, "user_id": user_id, "name": name})
