"""docs/first-shipment.md runs as written: its commands and SQL on a fresh database, then the GETs of
docs/first-shipment-read.md answer its JSON; and so it does as a newcomer runs it, after the demo, in a
checkout whose embedded database already holds the demo's organization acme."""
import json
import os
import re
import shlex
import signal
import subprocess

import pytest
import requests

from tests.support import ROOT
from tests.support.demo_run import checkout_copy, demo_environment
from tests.support.factories import auth
from tests.support.processes import free_port, stop, wait_for

# The tutorial's two pages: shell commands and SQL blocks (one transaction each), then the answers shown.
PAGES = (ROOT / "docs" / "first-shipment.md", ROOT / "docs" / "first-shipment-read.md")
BLOCK = re.compile(r"^```(sh|sql)\n(.*?)^```$", re.S | re.M)
ANSWER = re.compile(r"^`GET (\S+)` answers:\n\n```json\n(.*?)^```$", re.S | re.M)
FLASK = ".venv/bin/flask --app app "
TOKEN = re.compile(r"^export TOKEN=\$\((.*)\)$")


def commands(page):
    """The lines of a page's shell blocks, in order."""
    return [line for kind, text in BLOCK.findall(page.read_text()) if kind == "sh"
            for line in text.splitlines() if line.strip()]


def example():
    """(shell commands of the first page, SQL blocks, [(path, expected JSON)]) of the tutorial, in page order."""
    section = "".join(page.read_text() for page in PAGES)
    statements = [text for kind, text in BLOCK.findall(section) if kind == "sql"]
    answers = [(path, json.loads(text)) for path, text in ANSWER.findall(section)]
    return commands(PAGES[0]), statements, answers


def test_the_page_has_every_step():
    written, statements, answers = example()
    assert written == [
        "export EMBEDDED_DATABASE=first_shipment", f"{FLASK}db init",
        f'{FLASK}orgs create --name "Acme Produce" --slug acme --owner owner@acme.example',
        f"export TOKEN=$({FLASK}tokens create --org acme --user owner@acme.example --name writer-guide "
        "--expires never)",
        f"{FLASK}db psql -v ON_ERROR_STOP=1 -1 -f block.sql"]
    assert commands(PAGES[1]) == [
        "export EMBEDDED_DATABASE=first_shipment",
        ".venv/bin/gunicorn -c gunicorn.conf.py -w 1 -b 127.0.0.1:8002 'app:create_app()'",
        'curl -s -H "Authorization: Bearer $TOKEN" http://127.0.0.1:8002/shipments/shp_1']
    assert len(statements) == 5
    assert [path for path, _body in answers] == ["/shipments/shp_1", "/shipments/shp_1/timeline",
                                                 "/shipments/shp_1/documents", "/shipments/shp_1/packing_lists"]


def test_the_example_runs_on_a_fresh_database_and_reads_back_as_shown(app, client, conn):
    """The flask commands through the test app (on the test's database), each SQL block in one transaction."""
    written, statements, answers = example()
    runner = app.test_cli_runner()
    token = None
    for command in written:
        command = TOKEN.sub(r"\1", command)
        if not command.startswith(FLASK) or " db psql " in command:
            continue  # the database is the test's; the SQL runs below
        result = runner.invoke(args=shlex.split(command[len(FLASK):]))
        assert result.exit_code == 0, (command, result.output)
        token = result.stdout.strip() if "tokens create" in command else token
    for statement in statements:
        with conn, conn.cursor() as cur:
            conn.autocommit = False
            cur.execute(statement)
        conn.autocommit = True
    for path, expected in answers:
        response = client.get(path, headers=auth(token))
        assert (path, response.status_code, response.json) == (path, 200, expected)


@pytest.fixture(scope="module")
def after_the_demo():
    """A copy of the checkout whose embedded database holds the demo's data (acme included), all stopped."""
    with checkout_copy() as copy:
        env = demo_environment()
        for command in (["db", "init"], ["demo", "seed", "--shipments", "3", "--globex-shipments", "0"]):
            made = subprocess.run([".venv/bin/flask", "--app", "app", *command], cwd=copy, env=env,
                                  capture_output=True, text=True, timeout=180)
            assert made.returncode == 0, made.stdout + made.stderr
        try:
            yield copy, env
        finally:
            _stop_embedded_server(copy)


def _stop_embedded_server(copy):
    """The embedded server stops with the last process using it; one a failed test left up is stopped here."""
    pid_file = copy / ".data" / "pg" / "postmaster.pid"
    if not wait_for(lambda: not pid_file.exists(), 15):
        os.kill(int(pid_file.read_text().split()[0]), signal.SIGINT)  # fast shutdown
        wait_for(lambda: not pid_file.exists(), 15)


@pytest.mark.slow
def test_a_newcomer_runs_both_pages_as_written_after_the_demo(after_the_demo):
    """Every command of both pages in a shell, DATABASE_URL unset: the SQL through the page's psql command, the
    service started as the second page says (on a free port), each answer as shown; the demo's data untouched."""
    copy, env = after_the_demo
    written, statements, answers = example()
    script = ["set -e"]
    for command in written:
        if " db psql " in command:  # each block saved as block.sql and run by the command the page gives
            script += [f"cat > block.sql <<'SQL'\n{statement}SQL\n{command}" for statement in statements]
        else:
            script.append(command)
    script.append('echo "token=$TOKEN"')
    run = subprocess.run(["bash", "-c", "\n".join(script)], cwd=copy, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    token = re.search(r"^token=(sv_\w+)$", run.stdout, re.M).group(1)
    # The scratch database shares the embedded server's secret key, as the demo's does.
    assert "plain text" not in run.stdout + run.stderr, run.stdout + run.stderr

    port = free_port()
    serving, curl = commands(PAGES[1])[:2], commands(PAGES[1])[2]
    # exec: the shell becomes gunicorn, so that stopping it stops the service.
    started = "\n".join(serving).replace(".venv/bin/gunicorn", "exec .venv/bin/gunicorn")
    service = subprocess.Popen(["bash", "-c", started.replace("127.0.0.1:8002", f"127.0.0.1:{port}")], cwd=copy,
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        assert wait_for(lambda: _answers(f"{base}/openapi.json"), 60)
        shown = subprocess.run(["bash", "-c", curl.replace("127.0.0.1:8002", f"127.0.0.1:{port}")], cwd=copy,
                               env={**env, "TOKEN": token}, capture_output=True, text=True, timeout=30)
        assert json.loads(shown.stdout) == answers[0][1]
        for path, expected in answers:
            response = requests.get(f"{base}{path}", headers=auth(token), timeout=10)
            assert (path, response.status_code, response.json()) == (path, 200, expected)
    finally:
        stop(service)
    # The demo's database still holds the demo's acme, and none of the tutorial's rows.
    check = subprocess.run([".venv/bin/flask", "--app", "app", "db", "psql", "-At", "-c",
                            "SELECT name, (SELECT count(*) FROM shipments WHERE reference = 'PO-1001') "
                            "FROM organizations WHERE slug = 'acme'"],
                           cwd=copy, env=env, capture_output=True, text=True, timeout=60)
    assert check.stdout.strip() != "" and check.stdout.strip().endswith("|0"), check.stdout + check.stderr


def _answers(url):
    try:
        return requests.get(url, timeout=2).status_code == 200
    except (requests.ConnectionError, requests.Timeout):  # not up yet, or its first answer (the description) is slow
        return False
