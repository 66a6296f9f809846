"""docs/writing-data.md runs as written: its commands and SQL on a fresh database, then its GETs answer its JSON."""
import json
import re
import shlex

from tests.support import ROOT
from tests.support.factories import auth

PAGE = ROOT / "docs" / "writing-data.md"
# The example's section: shell commands, SQL blocks (one transaction each) and the answers shown.
SECTION = re.compile(r"^## A first shipment, step by step\n(.*?)^## ", re.S | re.M)
BLOCK = re.compile(r"^```(sh|sql)\n(.*?)^```$", re.S | re.M)
ANSWER = re.compile(r"^`GET (\S+)` answers:\n\n```json\n(.*?)^```$", re.S | re.M)
FLASK = ".venv/bin/flask --app app "


def example():
    """(shell commands, SQL blocks, [(path, expected JSON)]) of the page's example, in page order."""
    section = SECTION.search(PAGE.read_text()).group(1)
    blocks = BLOCK.findall(section)
    commands = [line for kind, text in blocks if kind == "sh" for line in text.splitlines() if line.strip()]
    statements = [text for kind, text in blocks if kind == "sql"]
    answers = [(path, json.loads(text)) for path, text in ANSWER.findall(section)]
    return commands, statements, answers


def test_the_page_has_every_step():
    commands, statements, answers = example()
    assert [command.split()[3:5] for command in commands] == [["db", "init"], ["orgs", "create"],
                                                              ["tokens", "create"]]
    assert len(statements) == 5
    assert [path for path, _body in answers] == ["/shipments/shp_1", "/shipments/shp_1/timeline",
                                                 "/shipments/shp_1/documents", "/shipments/shp_1/packing_lists"]


def test_the_example_runs_on_a_fresh_database_and_reads_back_as_shown(app, client, conn):
    commands, statements, answers = example()
    runner = app.test_cli_runner()
    token = None
    for command in commands:
        assert command.startswith(FLASK), command
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
