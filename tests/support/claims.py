"""The claim's lock taken alone, as a claim in progress holds it (tests of the per-endpoint cap)."""
from models.webhook_deliveries import CAP_LOCK_SPACE


def lock_claimable(conn, now, limit):
    """Ids of up to `limit` endpoints with due work, locked for `conn`'s transaction (others skipped)."""
    with conn.cursor() as cur:
        cur.execute("SELECT id FROM lock_claimable_endpoints(%s, %s, %s) AS id", (now, limit, CAP_LOCK_SPACE))
        return [row["id"] for row in cur.fetchall()]
