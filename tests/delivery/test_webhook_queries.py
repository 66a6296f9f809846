"""docs/webhook-queries.md: every query runs as written on the schema, and the page counts the views it shows."""
import re

from tests.support import ROOT

PAGE = ROOT / "docs" / "webhook-queries.md"
NUMBERS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def queries():
    """The page's SQL statements, in order."""
    blocks = re.findall(r"^```sql\n(.*?)^```$", PAGE.read_text(), re.S | re.M)
    lines = [line for block in blocks for line in block.splitlines() if not line.startswith("--")]
    return [statement.strip() for statement in "\n".join(lines).split(";") if statement.strip()]


def test_every_query_runs_on_the_schema(conn):
    with conn.cursor() as cur:
        for statement in queries():
            cur.execute(statement.replace("'whe_3'", "'whe_1'"))
            assert cur.fetchall() is not None


def test_the_views_counted_are_the_views_shown(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT table_name FROM information_schema.views WHERE table_schema = 'public' "
                    "AND table_name LIKE 'webhook%'")
        views = {row["table_name"] for row in cur.fetchall()}
    shown = {name for statement in queries() for name in re.findall(r"\bFROM (\w+)", statement) if name in views}
    said = re.search(r"^(\w+) views read plainly", PAGE.read_text(), re.M).group(1)
    assert (NUMBERS[said.lower()], shown) == (len(views), views)
