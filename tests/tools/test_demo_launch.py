"""demo/launch.py: what `dev.py demo` finds again at a restart (seed, token, endpoint) and what it makes once."""
import pytest

from demo import launch
from models import organizations, tokens
from tests.support.apps import make_app

RECEIVER = "https://127.0.0.1:8001/webhooks"


@pytest.fixture
def flask(database_url, tmp_path):
    """`flask --app app ...` as dev.py runs it (with the demo's allowed network), through Click's runner."""
    app = make_app(database_url, STORAGE_DIR=str(tmp_path / "storage"), WEBHOOK_ALLOWED_NETWORKS=["127.0.0.1/32"])
    runner = app.test_cli_runner()

    def run(*args, capture=False):
        result = runner.invoke(args=list(args))
        assert result.exit_code == 0, result.output
        return result.output.strip()

    return run


def endpoints(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT id, url, enabled FROM webhook_endpoints ORDER BY id")
        return cur.fetchall()


def test_seed_state(database_url, flask, monkeypatch):
    assert launch.seed_state(database_url) == "missing"
    flask("demo", "seed", "--shipments", "30", "--globex-shipments", "5", "--workers", "1")
    assert launch.seed_state(database_url) == "incomplete"  # fewer than the 300 and 40 of a whole seed
    monkeypatch.setattr(launch, "SEEDED_SHIPMENTS", {"acme": 30, "globex": 5})
    assert launch.seed_state(database_url) == "seeded"


def test_the_endpoint_is_made_once_and_put_right(database_url, flask, conn):
    flask("demo", "seed", "--shipments", "5", "--globex-shipments", "0", "--workers", "1")
    first = launch.endpoint(database_url, RECEIVER, flask)
    assert first[0].startswith("whe_") and first[1].startswith("whsec_")
    assert launch.endpoint(database_url, RECEIVER, flask) == first
    flask("webhooks", "disable", first[0])
    assert launch.endpoint(database_url, RECEIVER, flask) == first
    assert [(row["url"], row["enabled"]) for row in endpoints(conn)] == [(RECEIVER, True)]
    moved = launch.endpoint(database_url, "https://127.0.0.1:8002/webhooks", flask)
    assert moved[0] != first[0]
    assert [(f"whe_{row['id']}", row["url"]) for row in endpoints(conn)] \
        == [(moved[0], "https://127.0.0.1:8002/webhooks")]


def test_the_token_is_kept_while_it_works(database_url, flask, conn, tmp_path, monkeypatch):
    monkeypatch.setattr(launch, "TOKEN_FILE", tmp_path / "demo" / "token")
    monkeypatch.setattr(launch, "DEMO_DIR", tmp_path / "demo")
    assert launch.saved_token(database_url) is None
    flask("demo", "seed", "--shipments", "5", "--globex-shipments", "0", "--workers", "1")
    acme = organizations.get_organization_by_slug(conn, "acme")["id"]
    owner = organizations.get_membership(conn, acme, launch.OWNER)["user_id"]
    value, row = tokens.create_token(conn, acme, owner, "demo", "90d")
    launch.keep_token(value)
    assert oct(launch.TOKEN_FILE.stat().st_mode & 0o777) == "0o600"
    assert launch.saved_token(database_url) == value
    tokens.revoke_token(conn, row["id"])
    assert launch.saved_token(database_url) is None
    launch.TOKEN_FILE.write_text("not a token\n")
    assert launch.saved_token(database_url) is None
