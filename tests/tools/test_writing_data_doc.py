"""docs/first-shipment.md runs as written: its commands and SQL on a fresh database, then the GETs of
docs/first-shipment-read.md answer its JSON."""
import json
import re
import shlex

from tests.support import ROOT
from tests.support.factories import auth

# The tutorial's two pages: shell commands and SQL blocks (one transaction each), then the answers shown.
PAGES = (ROOT / "docs" / "first-shipment.md", ROOT / "docs" / "first-shipment-read.md")
BLOCK = re.compile(r"^```(sh|sql)\n(.*?)^```$", re.S | re.M)
ANSWER = re.compile(r"^`GET (\S+)` answers:\n\n```json\n(.*?)^```$", re.S | re.M)
FLASK = ".venv/bin/flask --app app "


def example():
    """(shell commands, SQL blocks, [(path, expected JSON)]) of the tutorial, in page order."""
    section = "".join(page.read_text() for page in PAGES)
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
