"""The README's tour and docs/sync.md say what the API does: every GET the tour shows answers 200 on the demo data
(alerts and checks are top level, `?shipment=`), and a mirror made from the change feed equals
`GET /shipments?archived=any`, archived shipments included."""
import re
import subprocess
import sys

from tests.support import ROOT

TOUR = ROOT.joinpath("README.md").read_text().split("## A ten-minute tour", 1)[1].split("\n## ", 1)[0]


def tour_paths():
    """The paths the tour's curl commands GET, and the paths it names in its text."""
    fetched = re.findall(r"curl -s -H \"Authorization: Bearer \$TOKEN\" \"?http://127\.0\.0\.1:8000(/[^\s\"<]+)\"?\n", TOUR)
    named = re.findall(r"`(/(?:shipments|alerts|checks)[^`\s]*\$SHIPMENT[^`\s]*)`", TOUR)
    return fetched, named


def chosen_shipment(client, headers):
    """What the tour's `export SHIPMENT=$(...)` sets: its GET, then its Python one-liner on the answer."""
    path, program = re.search(r"export SHIPMENT=\$\(curl -s -H \"Authorization: Bearer \$TOKEN\" "
                              r"\"http://127\.0\.0\.1:8000(\S+)\" \\\n\s+\| python3 -c '([^']+)'\)", TOUR).groups()
    answer = subprocess.run([sys.executable, "-c", program], input=client.get(path, headers=headers).get_data(),
                            capture_output=True, check=True)
    return answer.stdout.decode().strip()


def test_every_get_the_tour_shows_answers(demo_database):
    fetched, named = tour_paths()
    assert "/alerts?shipment=$SHIPMENT" in named and "/checks?shipment=$SHIPMENT" in named, named
    assert len(fetched) >= 6, fetched
    client = demo_database.app.test_client()
    shipment = chosen_shipment(client, demo_database.headers)
    assert re.fullmatch(r"shp_\d+", shipment)
    paths = [path.replace("$SHIPMENT", shipment) for path in fetched + named]
    answers = {path: client.get(path, headers=demo_database.headers).status_code for path in paths}
    assert answers == {path: 200 for path in paths}
    # What the tour used to suggest: alerts and checks do not hang off a shipment.
    assert client.get(f"/shipments/{shipment}/alerts", headers=demo_database.headers).status_code == 404


def test_the_tour_names_no_id_the_simulator_makes_stale(demo_database):
    """Steps 1 to 3 name no shipment by number (the simulator adds drafts, so the newest changes), and say
    which checks /checks lists by default; the checks path the tour gives with `status=` lists them all."""
    steps = TOUR.split("3. **The change feed.**", 1)[0]
    assert re.findall(r"shp_\d+", steps) == []
    assert "only failed and warning checks unless `status=` names others" in " ".join(steps.split())
    client = demo_database.app.test_client()
    shipment = chosen_shipment(client, demo_database.headers)
    (listed,) = [path.replace("$SHIPMENT", shipment) for path in tour_paths()[1] if "status=" in path]
    counts = client.get(f"/shipments/{shipment}", headers=demo_database.headers).json["checks"]
    listed_checks = client.get(listed, headers=demo_database.headers).json["data"]
    assert counts["total"] > 0 and len(listed_checks) == counts["total"]


def pages(client, headers, path, params, cursor):
    """Every item of a paged list, following `cursor(page)` while `has_more`."""
    items = []
    while True:
        page = client.get(path, query_string=params, headers=headers).json
        items += page["data"]
        if not page["has_more"]:
            return items
        params = {**params, **cursor(page)}


def test_a_mirror_of_the_feed_equals_the_list_with_archived_any(demo_database):
    client, headers = demo_database.app.test_client(), demo_database.headers
    mirror = {}
    for item in pages(client, headers, "/changes", {"limit": 100}, lambda page: {"since": page["next_since"]}):
        if item.get("deleted"):
            mirror.pop(item["id"], None)
        else:
            mirror[item["id"]] = item["revision"]
    every = pages(client, headers, "/shipments", {"limit": 100, "archived": "any"},
                  lambda page: {"starting_after": page["data"][-1]["id"]})
    default = pages(client, headers, "/shipments", {"limit": 100},
                    lambda page: {"starting_after": page["data"][-1]["id"]})
    assert mirror == {item["id"]: item["revision"] for item in every}
    # The default list hides the archived ones, which the feed holds: what sync.md says.
    archived = {item["id"] for item in every if item["archived"]}
    assert archived and {item["id"] for item in default} == set(mirror) - archived
    assert "`archived=any`" in ROOT.joinpath("docs", "sync.md").read_text()
