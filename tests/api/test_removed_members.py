"""A removed membership's tokens never work again, whichever writer removes and re-adds the member.

The rule is the database's (trigger memberships_revoke_tokens): the application and a SQL console
get it as the CLI does.
"""
import pytest

from tests.support.apps import once_seen
from tests.support.factories import auth, make_org, make_token

MEMBER = "member@acme.example"
INVALID_TOKEN = "invalid_token"


def sql(conn, statement, **params):
    with conn.cursor() as cur:
        cur.execute(statement, {"email": MEMBER, **params})


def member_id(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT id FROM users WHERE email = %s", (MEMBER,))
        return cur.fetchone()["id"]


def answers(client, token):
    """(status, error code) of GET /organization with `token`, once a 401 (every process sees a change within
    2 seconds: tests/support/apps.once_seen)."""
    response = once_seen(lambda: client.get("/organization", headers=auth(token)), lambda r: r.status_code == 401)
    return response.status_code, (response.get_json()["error"]["code"] if response.status_code != 200 else None)


def remove_by_update(conn):
    sql(conn, "UPDATE memberships SET removed_at = now() "
              "WHERE user_id = (SELECT id FROM users WHERE email = %(email)s)")


def readd_by_update(conn):
    sql(conn, "UPDATE memberships SET removed_at = NULL "
              "WHERE user_id = (SELECT id FROM users WHERE email = %(email)s)")


def remove_by_delete(conn):
    sql(conn, "DELETE FROM memberships WHERE user_id = (SELECT id FROM users WHERE email = %(email)s)")


def readd_by_insert(conn):
    sql(conn, "INSERT INTO memberships (organization_id, user_id, role) "
              "SELECT 1, id, 'member' FROM users WHERE email = %(email)s")


def remove_by_cli(cli):
    assert cli("members", "remove", "--org", "acme", "--email", MEMBER).exit_code == 0


def readd_by_cli(cli):
    assert cli("members", "add", "--org", "acme", "--email", MEMBER).exit_code == 0


@pytest.fixture
def cli(app, conn):
    make_org(conn, "acme")
    runner = app.test_cli_runner()
    return lambda *args: runner.invoke(args=list(args))


@pytest.mark.parametrize("remove, readd", [
    (remove_by_update, readd_by_update),
    (remove_by_delete, readd_by_insert),
    (remove_by_update, readd_by_cli),
    (remove_by_delete, readd_by_cli),
    ("cli", readd_by_update),
    ("cli", readd_by_cli),
], ids=["update-update", "delete-insert", "update-cli", "delete-cli", "cli-update", "cli-cli"])
def test_old_tokens_stay_dead_after_the_member_is_back(cli, conn, client, remove, readd):
    old = make_token(conn, 1, MEMBER)
    owners = make_token(conn, 1)
    assert answers(client, old) == (200, None)
    remove_by_cli(cli) if remove == "cli" else remove(conn)
    assert answers(client, old) == (401, INVALID_TOKEN)
    readd_by_cli(cli) if readd is readd_by_cli else readd(conn)
    assert answers(client, old) == (401, INVALID_TOKEN)
    new = make_token(conn, 1, MEMBER, name="after coming back")
    assert answers(client, new) == (200, None)
    assert answers(client, owners) == (200, None)  # other members' tokens are untouched


def test_removal_and_return_in_one_transaction(conn, cli, client):
    old = make_token(conn, 1, MEMBER)
    conn.autocommit = False
    remove_by_update(conn)
    readd_by_update(conn)
    remove_by_delete(conn)
    readd_by_insert(conn)
    conn.commit()
    conn.autocommit = True
    assert answers(client, old) == (401, INVALID_TOKEN)


def test_a_token_left_active_by_a_writer_without_triggers_dies_when_the_member_returns(conn, cli, client):
    # A restore or bulk load with triggers off (session_replication_role = replica) can leave a token
    # unrevoked after its membership went; the return of the member revokes it.
    old = make_token(conn, 1, MEMBER)
    with conn.cursor() as cur:
        cur.execute("SET session_replication_role = replica")
        cur.execute("DELETE FROM memberships WHERE user_id = %s", (member_id(conn),))
        cur.execute("RESET session_replication_role")
        cur.execute("SELECT count(*) AS n FROM tokens WHERE revoked_at IS NULL AND user_id = %s", (member_id(conn),))
        assert cur.fetchone()["n"] == 1
    readd_by_insert(conn)
    assert answers(client, old) == (401, INVALID_TOKEN)


def test_a_membership_moved_to_another_user_revokes_both_pairs(conn, cli, client):
    old = make_token(conn, 1, MEMBER)
    admins = make_token(conn, 1, "admin@acme.example")
    sql(conn, "DELETE FROM memberships WHERE user_id = (SELECT id FROM users WHERE email = 'admin@acme.example')")
    sql(conn, "UPDATE memberships SET user_id = (SELECT id FROM users WHERE email = 'admin@acme.example') "
              "WHERE user_id = (SELECT id FROM users WHERE email = %(email)s)")
    readd_by_insert(conn)
    assert answers(client, old) == (401, INVALID_TOKEN)
    assert answers(client, admins) == (401, INVALID_TOKEN)


def test_a_role_change_keeps_tokens(conn, cli, client):
    token = make_token(conn, 1, MEMBER)
    sql(conn, "UPDATE memberships SET role = 'admin' WHERE user_id = (SELECT id FROM users WHERE email = %(email)s)")
    assert answers(client, token) == (200, None)
    readd_by_cli(cli)  # `members add` of a current member only sets the role
    assert answers(client, token) == (200, None)


def test_list_says_member_removed_then_revoked(conn, cli):
    make_token(conn, 1, MEMBER, name="ci")
    remove_by_update(conn)
    assert cli("tokens", "list", "--org", "acme").stdout.splitlines()[1].split()[3] == "member_removed"
    readd_by_update(conn)
    assert cli("tokens", "list", "--org", "acme").stdout.splitlines()[1].split()[3] == "revoked"


def test_deleting_a_user_or_an_organization_still_works(conn, cli):
    make_token(conn, 1, MEMBER)
    make_token(conn, 1)
    sql(conn, "DELETE FROM users WHERE email = %(email)s")
    sql(conn, "DELETE FROM organizations WHERE slug = 'acme'")
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) AS n FROM tokens")
        assert cur.fetchone()["n"] == 0
