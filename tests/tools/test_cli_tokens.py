"""`flask tokens ...` and `flask members add|remove`: creation, the limit of 10, listing, revocation."""
import hashlib
import re
from datetime import datetime, timedelta, timezone

import pytest

from tests.support.factories import auth, make_org

TOKEN = re.compile(r"sv_[A-Za-z0-9]{40}")


@pytest.fixture
def cli(app, conn):
    make_org(conn, "acme")
    runner = app.test_cli_runner()
    return lambda *args: runner.invoke(args=list(args))


def create(cli, user="member@acme.example", name="ci", expires="never", *extra):
    result = cli("tokens", "create", "--org", "acme", "--user", user, "--name", name, "--expires", expires, *extra)
    assert result.exit_code == 0, result.output
    return result


def test_create_prints_only_the_token_on_stdout(cli, conn, client):
    result = create(cli)
    assert TOKEN.fullmatch(result.stdout.rstrip("\n"))
    assert result.stdout.count("\n") == 1
    token = result.stdout.strip()
    assert result.stderr == "created tok_1; the value above is shown once\n"
    assert client.get("/organization", headers=auth(token)).json["token"] == {
        "id": "tok_1", "name": "ci", "scopes": ["read"], "expires_at": None, "user_email": "member@acme.example"}
    with conn.cursor() as cur:
        cur.execute("SELECT fingerprint, t::text AS row FROM tokens t")
        row = cur.fetchone()
    assert bytes(row["fingerprint"]) == hashlib.sha256(token.encode()).digest()
    assert token[3:] not in row["row"]


def test_tokens_are_unique(cli):
    values = {create(cli, name=f"n{i}").stdout.strip() for i in range(5)}
    assert len(values) == 5


@pytest.mark.parametrize("expires, days", [("30d", 30), ("90d", 90), ("1y", 365), ("never", None)])
def test_expiry_choices(cli, conn, expires, days):
    create(cli, expires=expires)
    with conn.cursor() as cur:
        cur.execute("SELECT expires_at, created_at FROM tokens")
        row = cur.fetchone()
    if days is None:
        assert row["expires_at"] is None
    else:
        assert abs(row["expires_at"] - row["created_at"] - timedelta(days=days)) <= timedelta(days=1)


@pytest.mark.parametrize("args, code, message", [
    (["--expires", "7d"], 2, "'7d' is not one of '30d', '90d', '1y', 'never'"),
    (["--expires", "1Y"], 2, "'1Y' is not one of '30d', '90d', '1y', 'never'"),
    (["--name", "   "], 2, "the name must not be blank"),
    (["--user", "stranger@example.com"], 1, "stranger@example.com is not a member of acme"),
    (["--org", "nope"], 1, "no organization with slug 'nope'"),
])
def test_create_refusals(cli, conn, args, code, message):
    base = {"--org": "acme", "--user": "member@acme.example", "--name": "ci", "--expires": "30d"}
    base.update(dict(zip(args[::2], args[1::2])))
    result = cli("tokens", "create", *[part for pair in base.items() for part in pair])
    assert result.exit_code == code
    assert message in result.output
    assert result.stdout == ""
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) AS n FROM tokens")
        assert cur.fetchone()["n"] == 0


def test_at_most_ten_active_tokens_per_organization(cli, conn, client):
    values = [create(cli, user=f"{('owner', 'admin', 'member')[i % 3]}@acme.example", name=f"t{i}").stdout.strip()
              for i in range(10)]
    refused = cli("tokens", "create", "--org", "acme", "--user", "owner@acme.example", "--name", "x",
                  "--expires", "never")
    assert refused.exit_code == 1
    assert refused.stdout == ""
    assert "the organization already has 10 active tokens" in refused.stderr
    # Another organization has its own ten.
    make_org(conn, "globex")
    assert cli("tokens", "create", "--org", "globex", "--user", "owner@globex.example", "--name", "g",
               "--expires", "never").exit_code == 0
    # Revoked and expired tokens do not count.
    assert cli("tokens", "revoke", "tok_1").exit_code == 0
    create(cli, name="after revoke")
    assert cli("tokens", "create", "--org", "acme", "--user", "owner@acme.example", "--name", "x",
               "--expires", "never").exit_code == 1
    with conn.cursor() as cur:
        cur.execute("UPDATE tokens SET expires_at = now() - interval '1 minute' WHERE id = 2")
    assert client.get("/organization", headers=auth(values[1])).status_code == 401
    create(cli, name="after expiry")
    assert cli("tokens", "create", "--org", "acme", "--user", "owner@acme.example", "--name", "x",
               "--expires", "never").exit_code == 1


def test_list_shows_states_never_values(cli, conn):
    values = [create(cli, name=f"t{i}", expires="30d").stdout.strip() for i in range(4)]
    create(cli, user="owner@acme.example", name="owner's")
    cli("tokens", "revoke", "tok_2")
    with conn.cursor() as cur:
        cur.execute("UPDATE tokens SET expires_at = now() - interval '1 minute' WHERE id = 3")
    with conn.cursor() as cur:
        # Removed by the application writing the membership row (the CLI also revokes the tokens).
        cur.execute("UPDATE memberships SET removed_at = now() WHERE user_id = "
                    "(SELECT id FROM users WHERE email = 'owner@acme.example')")
    result = cli("tokens", "list", "--org", "acme")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["id", "name", "user_email", "state", "created_at", "expires_at", "revoked_at"]
    states = [(line.split()[0], line.split()[1], line.split()[2], line.split()[3]) for line in lines[1:]]
    assert states == [("tok_1", "t0", "member@acme.example", "active"),
                      ("tok_2", "t1", "member@acme.example", "revoked"),
                      ("tok_3", "t2", "member@acme.example", "expired"),
                      ("tok_4", "t3", "member@acme.example", "active"),
                      ("tok_5", "owner's", "owner@acme.example", "member_removed")]
    assert not any(value[3:] in result.output for value in values)
    assert TOKEN.search(result.output) is None


def test_list_as_member_shows_own_tokens_admin_all(cli):
    create(cli, user="member@acme.example", name="mine")
    create(cli, user="admin@acme.example", name="theirs")
    as_member = cli("tokens", "list", "--org", "acme", "--as", "member@acme.example").stdout
    as_admin = cli("tokens", "list", "--org", "acme", "--as", "admin@acme.example").stdout
    assert "mine" in as_member and "theirs" not in as_member
    assert "mine" in as_admin and "theirs" in as_admin


def test_revoke_stops_the_token_at_once(cli, client):
    token = create(cli).stdout.strip()
    assert client.get("/organization", headers=auth(token)).status_code == 200
    result = cli("tokens", "revoke", "tok_1")
    assert (result.exit_code, result.stdout) == (0, "revoked tok_1\n")
    assert client.get("/organization", headers=auth(token)).status_code == 401
    # Revoking again is harmless.
    assert cli("tokens", "revoke", "tok_1").exit_code == 0


@pytest.mark.parametrize("value, code, message", [
    ("tok_99", 1, "no token tok_99"),
    ("tok_0", 2, "'tok_0' is not a token id (tok_<n>)"),
    ("1", 2, "'1' is not a token id (tok_<n>)"),
    ("shp_1", 2, "'shp_1' is not a token id (tok_<n>)"),
])
def test_revoke_refusals(cli, value, code, message):
    create(cli)
    result = cli("tokens", "revoke", value)
    assert result.exit_code == code
    assert message in result.output


def test_revoke_rights(cli, client):
    admins = create(cli, user="admin@acme.example", name="admin's").stdout.strip()
    members = create(cli, user="member@acme.example", name="member's").stdout.strip()
    refused = cli("tokens", "revoke", "tok_1", "--as", "member@acme.example")
    assert refused.exit_code == 1
    assert "member@acme.example is a member and can revoke only their own tokens" in refused.output
    assert client.get("/organization", headers=auth(admins)).status_code == 200
    assert cli("tokens", "revoke", "tok_2", "--as", "member@acme.example").exit_code == 0
    assert client.get("/organization", headers=auth(members)).status_code == 401
    assert cli("tokens", "revoke", "tok_1", "--as", "owner@acme.example").exit_code == 0
    assert client.get("/organization", headers=auth(admins)).status_code == 401


def test_removed_member_tokens_stop_at_once_and_they_cannot_create_more(cli, client):
    token = create(cli).stdout.strip()
    assert cli("members", "remove", "--org", "acme", "--email", "member@acme.example").exit_code == 0
    assert client.get("/organization", headers=auth(token)).status_code == 401
    refused = cli("tokens", "create", "--org", "acme", "--user", "member@acme.example", "--name", "x",
                  "--expires", "never")
    assert refused.exit_code == 1
    # A removed member's tokens do not count toward the ten.
    for i in range(10):
        create(cli, user="owner@acme.example", name=f"o{i}")


def test_replace_revokes_the_same_name_first(cli, client):
    old = create(cli, name="ci").stdout.strip()
    new = create(cli, "member@acme.example", "ci", "never", "--replace").stdout.strip()
    assert client.get("/organization", headers=auth(old)).status_code == 401
    assert client.get("/organization", headers=auth(new)).status_code == 200


def test_expired_token_created_by_cli_stops_working(cli, conn, client):
    token = create(cli, expires="30d").stdout.strip()
    with conn.cursor() as cur:
        cur.execute("UPDATE tokens SET expires_at = %s", (datetime.now(timezone.utc) - timedelta(seconds=1),))
    assert client.get("/organization", headers=auth(token)).status_code == 401


def test_re_adding_a_removed_member_does_not_revive_old_tokens(cli, client):
    token = create(cli).stdout.strip()
    assert cli("members", "remove", "--org", "acme", "--email", "member@acme.example").exit_code == 0
    assert cli("members", "add", "--org", "acme", "--email", "member@acme.example").exit_code == 0
    assert client.get("/organization", headers=auth(token)).status_code == 401


def test_tokens_of_members_removed_outside_the_cli_do_not_count(cli, conn):
    for i in range(10):
        create(cli, name=f"m{i}")
    with conn.cursor() as cur:
        # The application removes the member by writing the membership row directly.
        cur.execute("UPDATE memberships SET removed_at = now() WHERE user_id = "
                    "(SELECT id FROM users WHERE email = 'member@acme.example')")
    create(cli, user="owner@acme.example", name="owner's")


@pytest.mark.parametrize("role, said", [("admin", "an admin"), ("owner", "an owner"), ("member", "a member")])
def test_members_add_says_the_role_in_english(cli, role, said):
    result = cli("members", "add", "--org", "acme", "--email", "new@acme.example", "--role", role)
    assert (result.exit_code, result.output) == (0, f"new@acme.example is {said} of acme\n")


def test_a_refused_role_is_said_in_english(cli):
    refused = cli("members", "add", "--org", "acme", "--email", "new@acme.example", "--role", "owner",
                  "--as", "admin@acme.example")
    assert (refused.exit_code, refused.output) == (
        1, "Error: admin@acme.example is an admin of acme; this needs one of: owner\n")
