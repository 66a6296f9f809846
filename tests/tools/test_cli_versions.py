"""`flask orgs versions` and `flask orgs pin-version`: an admin moves the pin forward, never back."""
import pytest

from rendering import versions
from tests.support.apps import once_seen
from tests.support.factories import auth, make_org, make_token

OLD, MIDDLE, NEW = "2026-10-01", "2027-01-01", "2027-06-01"


@pytest.fixture
def three_versions(monkeypatch):
    """Pretend two later versions were published (same shapes: only the names matter here)."""
    monkeypatch.setattr(versions, "PUBLISHED", (OLD, MIDDLE, NEW))
    monkeypatch.setattr(versions, "LATEST", NEW)


@pytest.fixture
def org(conn):
    org_id = make_org(conn, "acme")
    return {"id": org_id, "token": make_token(conn, org_id)}


@pytest.fixture
def cli(app):
    runner = app.test_cli_runner()
    return lambda *args: runner.invoke(args=list(args))


def pin(conn, version):
    with conn.cursor() as cur:
        cur.execute("UPDATE organizations SET api_version = %s WHERE slug = 'acme'", (version,))


def pinned(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT api_version FROM organizations WHERE slug = 'acme'")
        return cur.fetchone()["api_version"]


def pin_version(cli, version, actor="admin@acme.example", slug="acme"):
    return cli("orgs", "pin-version", "--org", slug, "--version", version, *(["--as", actor] if actor else []))


def test_first_pin_of_the_only_published_version(cli, conn, client, org):
    result = pin_version(cli, OLD)
    assert (result.exit_code, result.stdout, result.stderr) == (0, "acme is pinned to 2026-10-01 (was not pinned)\n", "")
    assert pinned(conn) == OLD
    response = client.get("/organization", headers=auth(org["token"]))
    assert response.headers["Service-Version"] == OLD
    assert response.json["api_version"] == OLD


def test_pin_moves_forward_and_the_api_follows(cli, conn, client, org, three_versions):
    pin(conn, OLD)
    assert client.get("/organization", headers=auth(org["token"])).headers["Service-Version"] == OLD
    result = pin_version(cli, MIDDLE)
    assert (result.exit_code, result.stdout) == (0, "acme is pinned to 2027-01-01 (was 2026-10-01)\n")
    assert pinned(conn) == MIDDLE
    response = once_seen(lambda: client.get("/organization", headers=auth(org["token"])),
                         lambda answer: answer.headers.get("Service-Version") != OLD)
    assert response.status_code == 200
    assert response.headers["Service-Version"] == MIDDLE
    assert response.json["api_version"] == MIDDLE
    # Owners may move it too, and the header still chooses a version per request without moving it.
    result = pin_version(cli, NEW, actor="owner@acme.example")
    assert (result.exit_code, result.stdout) == (0, "acme is pinned to 2027-06-01 (was 2027-01-01)\n")
    assert once_seen(lambda: client.get("/shipments", headers=auth(org["token"])),
                     lambda answer: answer.headers.get("Service-Version") != MIDDLE).headers["Service-Version"] == NEW
    older = client.get("/organization", headers=auth(org["token"], **{"Service-Version": OLD}))
    assert (older.headers["Service-Version"], older.json["api_version"]) == (OLD, NEW)
    assert pinned(conn) == NEW


def test_same_version_again_changes_nothing(cli, conn, org, three_versions):
    pin(conn, MIDDLE)
    result = pin_version(cli, MIDDLE)
    assert (result.exit_code, result.stdout) == (0, "acme is already pinned to 2027-01-01\n")
    assert pinned(conn) == MIDDLE


@pytest.mark.parametrize("current, version, message", [
    (NEW, OLD, "Error: acme is pinned to 2027-06-01; a pin only moves forward and 2026-10-01 is older. "
               "A request can still ask for 2026-10-01 with the Service-Version header.\n"),
    (MIDDLE, OLD, "Error: acme is pinned to 2027-01-01; a pin only moves forward and 2026-10-01 is older. "
                  "A request can still ask for 2026-10-01 with the Service-Version header.\n"),
    # Never pinned: its first request and its webhooks use the latest, so forward starts there.
    (None, MIDDLE, "Error: acme has no pin yet, so its requests without Service-Version and its webhooks use "
                   "the latest version, 2027-06-01; a pin only moves forward and 2027-01-01 is older. "
                   "A request can still ask for 2027-01-01 with the Service-Version header.\n"),
])
def test_pin_never_moves_backwards(cli, conn, org, three_versions, current, version, message):
    pin(conn, current)
    result = pin_version(cli, version)
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", message)
    assert pinned(conn) == current


def test_never_pinned_organization_may_be_pinned_to_the_latest(cli, conn, client, org, three_versions):
    result = pin_version(cli, NEW)
    assert (result.exit_code, result.stdout) == (0, "acme is pinned to 2027-06-01 (was not pinned)\n")
    assert client.get("/organization", headers=auth(org["token"])).json["api_version"] == NEW


@pytest.mark.parametrize("version", ["2026-10-02", "2027-01-02", "2026-1-01", "latest", ""])
def test_unpublished_version_is_refused(cli, conn, org, three_versions, version):
    pin(conn, OLD)
    result = pin_version(cli, version)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.endswith(f"Error: Invalid value for --version: {version!r} is not a published version; "
                                  "published: 2026-10-01, 2027-01-01, 2027-06-01\n")
    assert pinned(conn) == OLD


@pytest.mark.parametrize("actor, message", [
    ("member@acme.example", "Error: member@acme.example is a member of acme; this needs one of: admin, owner\n"),
    ("owner@globex.example", "Error: owner@globex.example is not a member of acme\n"),
])
def test_only_admins_and_owners_move_the_pin(cli, conn, org, three_versions, actor, message):
    make_org(conn, "globex")
    pin(conn, OLD)
    result = pin_version(cli, NEW, actor=actor)
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", message)
    assert pinned(conn) == OLD


def test_unknown_organization(cli, org):
    result = pin_version(cli, OLD, slug="nope")
    assert (result.exit_code, result.stderr) == (1, "Error: no organization with slug 'nope'\n")


def test_versions_lists_the_published_ones(cli, conn, org, three_versions):
    result = cli("orgs", "versions")
    assert (result.exit_code, result.stdout) == (0, "version     latest\n"
                                                    "2026-10-01\n"
                                                    "2027-01-01\n"
                                                    "2027-06-01  yes\n")
    pin(conn, MIDDLE)
    result = cli("orgs", "versions", "--org", "acme")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "version     latest  pinned\n"
                                                                   "2026-10-01\n"
                                                                   "2027-01-01          yes\n"
                                                                   "2027-06-01  yes\n", "")


def test_versions_of_a_never_pinned_organization(cli, org):
    result = cli("orgs", "versions", "--org", "acme")
    assert result.exit_code == 0
    assert result.stdout == "version     latest  pinned\n2026-10-01  yes\n"
    assert result.stderr == "acme has no pin yet: its first request without Service-Version pins it to 2026-10-01\n"
