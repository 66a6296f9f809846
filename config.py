"""Every setting and its default, read in one order: defaults, DATABASE_URL, SHIPTRACK_* variables, overrides.

Both entry points read settings here: `create_app` (the API, its CLI) and `python -m delivery`
(which must not build the Flask application just to learn its configuration).
"""
import copy
import json
import os
from pathlib import Path

# Settings are read from SHIPTRACK_<KEY> variables.
ENV_PREFIX = "SHIPTRACK"

DEFAULTS = {
    # PostgreSQL URL; None starts the embedded server (models.db.resolve_database_url) so a checkout just runs.
    "DATABASE_URL": None,
    # Folder holding document files; the database stores each file's key in it. Beside the code for a checkout.
    "STORAGE_DIR": str(Path(__file__).resolve().parent / "storage"),
    # Retry-After of the 503 answered while the database cannot be reached: a pooled connection is
    # replaced as soon as the server is back, so a short wait is enough, and short enough to poll.
    "DATABASE_RETRY_AFTER": 5,
    # Requests per window by token, by address, and by address without a token (SPEC: rate limits); the
    # not_modified_ budgets bound the 304s, which the others do not count, at ten times their request limit.
    "RATE_LIMITS": {"window_seconds": 300, "per_token": 600, "per_ip": 1200, "anonymous_per_ip": 30,
                    "not_modified_per_token": 6000, "not_modified_anonymous_per_ip": 300},
    # The largest request body read, in bytes (Flask's own key: request.data and forms are held to it too).
    # The API's GETs take none; the largest JSON-RPC message /mcp is sent, a tools/call with every argument
    # at its longest, is about 8 KB (tests/contract/test_request_bodies.py), so 64 KiB leaves room for any client.
    "MAX_CONTENT_LENGTH": 65536,
    # Writing a response (serving.py, docs/decisions-http.md "Slow readers"): it must be read within
    # RESPONSE_SECONDS plus its length at RESPONSE_BYTES_PER_SECOND, else its connection is closed. 30 s covers
    # the application's own time (its database waits are bounded well inside it) and a slow link's start.
    "RESPONSE_SECONDS": 30,
    # 16 KiB/s (about 130 kbit/s, a poor mobile link): a 25 MB document file is given 30 + 1,526 s.
    "RESPONSE_BYTES_PER_SECOND": 16384,
    # Proxies in front of the service whose X-Forwarded-For hop is trusted; 0 trusts none (direct exposure).
    "TRUSTED_PROXIES": 0,
    # The service's own domain; it and its subdomains are refused as webhook hosts.
    "SERVICE_DOMAIN": "shiptrack.example",
    # Networks a webhook URL may resolve to despite not being public (tests, demos); none, so SSRF is refused.
    "WEBHOOK_ALLOWED_NETWORKS": [],
    # A CA bundle trusted besides certifi's public CAs, never instead (test, demo or in-house CAs); None: public only.
    "WEBHOOK_CA_BUNDLE": None,
    # Requests in flight at once in one delivery process: threads mostly wait on receivers, so many are cheap.
    "WEBHOOK_WORKERS": 128,
    # Requests in flight per endpoint: a slow endpoint holds at most this many workers, the others keep theirs.
    "WEBHOOK_PER_ENDPOINT": 16,
    # A claimed delivery not recorded within this is due again (a crashed pass); well above the 15 s a send takes.
    "WEBHOOK_LEASE_SECONDS": 300,
    # A cron pass (every minute) claims new work this long, then drains (at most 15 s), before the next starts.
    "WEBHOOK_PASS_SECONDS": 45,
    # Connections (models/db.py, docs/operations.md "Behind a pooler" and "Timeouts").
    # Connections a process keeps to the database at most: the API's pool per gunicorn worker.
    "DATABASE_POOL_SIZE": 8,
    # The pooler DATABASE_URL goes through: "session", "transaction", or null: found out at each connection
    # (a pooler found is taken for a transaction pooler). Through a transaction pooler nothing lives in a
    # session (no PREPARE, no SET, no LISTEN).
    "DATABASE_POOLER": None,
    # A direct URL (past the pooler) for the LISTEN connections alone (the delivery script's, and each API
    # process's for changes to tokens); null listens on DATABASE_URL, or not at all through a transaction
    # pooler (then new events are found by polling, and tokens are looked up again every second).
    "DATABASE_LISTEN_URL": None,
    # Requests a gunicorn worker holds at most for GET /changes and GET /events with `wait` (api/waiting.py): a
    # held request costs a socket and about 10 KB; past this many, one is answered at once (docs/sync.md).
    "WAITERS_PER_PROCESS": 500,
    # A hot standby (or a libpq multi-host URL naming several) the API's GETs are read from while it is at most
    # DATABASE_REPLICA_LAG_SECONDS behind the primary, and whenever the primary is away; every write stays on
    # DATABASE_URL (docs/scaling.md "Reads from hot standbys"). None: everything on DATABASE_URL.
    "DATABASE_REPLICA_URL": None,
    # The most a standby may be behind the primary and still serve reads, in seconds (measured every second).
    "DATABASE_REPLICA_LAG_SECONDS": 5,
    # Seconds the API waits for a new connection, and for one statement (then answers 503): both well
    # inside gunicorn's 30 s worker timeout, so a database that hangs never gets a worker killed.
    "DATABASE_CONNECT_TIMEOUT": 5,
    # Seconds one statement of the API may run: far above its slowest (the at-risk list, docs/performance.md).
    "DATABASE_STATEMENT_TIMEOUT": 5,
    # Seconds a gunicorn worker waits for any one answer of the database, kept by the worker itself
    # (models/deadline.py): what the server's statement timeout cannot see, a statement queued in a pooler
    # while the database is away or a server that stopped answering. Above the statement timeout, so the
    # server's own ends a slow statement first; None waits as long as it takes.
    "DATABASE_CLIENT_TIMEOUT": 8,
    # The delivery script's: it waits out outages by itself (backoff), and renders in batches.
    "DELIVERY_CONNECT_TIMEOUT": 10,
    # Seconds one statement of the delivery script may run before its connection is made again.
    "DELIVERY_STATEMENT_TIMEOUT": 60,
    # The CLI's: an operator waits at the terminal, so a hanging database is an error after this.
    "CLI_CONNECT_TIMEOUT": 10,
    # Seconds one statement of a command may run; 0 is none: migrations and seeding take as long as the data.
    "CLI_STATEMENT_TIMEOUT": 0,
    # SMTP server for e-mails about disabled endpoints; None logs a warning instead of e-mailing.
    "SMTP_HOST": None,
    # The SMTP port: 25, a local relay without authentication.
    "SMTP_PORT": 25,
    # Sender address of those e-mails, in the service's own domain.
    "SMTP_FROM": "webhooks@shiptrack.example",
    # Observability (docs/operations.md, "Health checks, metrics and logs").
    # Log lines: "text" for people, "json" for one JSON object per line (log shippers); every process reads it.
    "LOG_FORMAT": "text",
    # GET /metrics and the request metrics; false answers /metrics 404 and records nothing (bench/metrics_cost.py).
    "METRICS_ENABLED": True,
    # Networks allowed to read GET /metrics (the address TRUSTED_PROXIES yields); elsewhere it is 404.
    "METRICS_ALLOWED_NETWORKS": ["127.0.0.0/8", "::1/128"],
    # The statement of GET /readyz and of a /metrics scrape is cancelled after this long: a check that
    # waits on a stuck database must answer "not ready" before the load balancer's own timeout.
    "PROBE_TIMEOUT_SECONDS": 2,
    # `python -m delivery` serves its own metrics on this port (one per delivery process); None: off.
    "DELIVERY_METRICS_PORT": None,
    # The address it listens on: loopback unless a Prometheus on another machine scrapes it.
    "DELIVERY_METRICS_HOST": "127.0.0.1",
    # The key encrypting webhook endpoint secrets at rest (docs/secret-key.md), so that a dump or a backup of
    # the database signs nothing: `flask --app app secrets new-key` makes one. None reads SECRET_KEY_FILE;
    # with neither, the embedded database keeps its own key in .data/secret_key, and any other database
    # stores secrets as plain text, with a warning at start, until a key is set and they are encrypted.
    "SECRET_KEY": None,
    # A file holding the key instead (a mounted secret), which keeps it out of the environment of processes.
    "SECRET_KEY_FILE": None,
    # Earlier keys, comma-separated, still opening stored secrets while `secrets rotate` re-encrypts them.
    "SECRET_KEY_OLD": None,
}


def load_config(overrides=None, environment=True):
    """The settings: DEFAULTS, then $DATABASE_URL, then SHIPTRACK_<KEY> variables, then `overrides`.

    Variables are read as Flask's `Config.from_prefixed_env` reads them, in name order: JSON when the
    value parses, else the string; `__` in a name sets a key of a nested dict
    (SHIPTRACK_RATE_LIMITS__per_token=100). As by Flask's `from_mapping`, only upper-case keys of
    `overrides` are taken. With `environment=False` no variable is read (tests that must not see the
    ones of the process running them). Written here, not taken from Flask: the delivery script reads
    its settings here and imports no web framework.
    """
    values = copy.deepcopy(DEFAULTS)  # a nested variable must not change the module's table
    if environment:
        values["DATABASE_URL"] = os.environ.get("DATABASE_URL") or None
        for name in sorted(os.environ):
            if name.startswith(f"{ENV_PREFIX}_"):
                _set(values, name.removeprefix(f"{ENV_PREFIX}_"), os.environ[name])
    values.update((key, value) for key, value in (overrides or {}).items() if key.isupper())
    return values


def _set(values, key, text):
    """Set one variable's value: JSON when it parses, else the text; KEY__part sets `part` of the dict KEY."""
    try:
        value = json.loads(text)
    except ValueError:
        value = text
    *parents, last = key.split("__")
    for parent in parents:
        values = values.setdefault(parent, {})
    values[last] = value
