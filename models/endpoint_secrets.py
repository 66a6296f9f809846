"""Webhook endpoint secrets as stored: how many are encrypted, and sealing them all again (delivery/secret_key.py)."""
from models.db import execute, execute_all, execute_one

# What an encrypted stored secret looks like (delivery.secret_key.ENCRYPTED_PREFIX); anything else is plain text.
_ENCRYPTED = {"encrypted": "fernet:%"}


# survey_secrets: at start of every process, which opens every encrypted secret (at most five endpoints
# per organization).
_SURVEY_SECRETS_SQL = """
SELECT count(*) FILTER (WHERE secret NOT LIKE %(encrypted)s) AS plain,
       coalesce(array_agg(id ORDER BY id) FILTER (WHERE secret LIKE %(encrypted)s), '{}') AS ids,
       coalesce(array_agg(secret ORDER BY id) FILTER (WHERE secret LIKE %(encrypted)s), '{}') AS secrets
  FROM webhook_endpoints
"""

# lock_secrets: `secrets encrypt` and `secrets rotate`; `roll-secret` meanwhile waits for them.
_LOCK_SECRETS_SQL = """
SELECT id, secret FROM webhook_endpoints
 WHERE NOT %(only_plain)s OR secret NOT LIKE %(encrypted)s
 ORDER BY id FOR UPDATE
"""

# store_secrets: a re-encryption changes no setting, so updated_at is left alone.
_STORE_SECRETS_SQL = """
UPDATE webhook_endpoints e SET secret = v.secret
  FROM unnest(%(ids)s::bigint[], %(secrets)s::text[]) AS v (id, secret)
 WHERE e.id = v.id
"""


def survey(conn):
    """How many stored secrets are plain text (`plain`), and the encrypted ones with their endpoints (`ids`,
    `secrets`, in id order)."""
    return execute_one(conn, _SURVEY_SECRETS_SQL, _ENCRYPTED)


def lock_all(conn, only_plain=False):
    """Every endpoint's (id, stored secret), locked until the caller's transaction ends; with `only_plain`,
    only those stored as plain text."""
    return [(row["id"], row["secret"])
            for row in execute_all(conn, _LOCK_SECRETS_SQL, {"only_plain": only_plain, **_ENCRYPTED})]


def store_all(conn, secrets):
    """Store new values of endpoints' secrets, from (id, stored secret) pairs; returns how many.

    A re-encryption changes no setting, so updated_at is left alone.
    """
    return execute(conn, _STORE_SECRETS_SQL, {"ids": [pair[0] for pair in secrets],
                                              "secrets": [pair[1] for pair in secrets]})
