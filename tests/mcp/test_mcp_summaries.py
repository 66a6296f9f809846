"""Every tool's summary on the demo data reads as words: no stray False, True, 0 or None where a part was left out.

The tools are called through /mcp in process (the Flask test client), on many shipments of the demo data, so that
every kind of item (at risk or not, with or without clocks, documents, packing lists) is summarised.
"""
import json
import re

import pytest

HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
# A part of a summary line that is only a Python value: what `x and f"..."` leaves when x is False, 0 or None.
STRAY = re.compile(r"(?:^|· )(False|True|None|0)(?= ·|$)|\bNone\b|\b(?:True|False)\b", re.MULTILINE)
SHIPMENTS = 100


@pytest.fixture(scope="module")
def call(demo_database):
    """call(tool, **arguments) -> the summary text of that tool on the demo data."""
    client = demo_database.app.test_client()
    headers = {**demo_database.headers, **HEADERS}

    def call(tool, **arguments):
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
        response = client.post("/mcp", json=message, headers=headers)
        assert response.status_code == 200, response.get_data(as_text=True)
        result = response.json["result"]
        assert result["isError"] is False, (tool, arguments, result)
        return result["content"][0]["text"]

    return call


def summaries(call):
    """(tool, arguments, text) of every tool on the demo data: lists whole, and each listed shipment's tools."""
    answers = []

    def add(tool, **arguments):
        text = call(tool, **arguments)
        answers.append((tool, arguments, text))
        return text

    page = json.loads(call("search_shipments", limit=SHIPMENTS, full=True))["data"]
    add("search_shipments", limit=SHIPMENTS)
    add("search_shipments", q="avocado", archived="any", limit=SHIPMENTS)
    add("list_free_time_at_risk")
    add("list_alerts", limit=100)
    add("list_checks", limit=100)
    add("list_checks", status="passed,failed,warning", limit=100)
    add("list_changes", limit=100)
    add("get_organization")
    for shipment in [item["id"] for item in page]:
        for tool in ("get_shipment", "get_shipment_timeline", "get_shipment_free_time",
                     "list_shipment_documents", "list_shipment_packing_lists"):
            add(tool, shipment_id=shipment)
        documents = json.loads(call("list_shipment_documents", shipment_id=shipment, full=True))["data"]
        for document in documents:
            add("get_document_data", document_id=document["id"])
    return answers


def test_no_tool_summary_carries_a_stray_python_value(call):
    answers = summaries(call)
    assert {tool for tool, _arguments, _text in answers} == {
        "search_shipments", "get_shipment", "get_shipment_timeline", "get_shipment_free_time",
        "list_free_time_at_risk", "list_shipment_documents", "get_document_data", "list_shipment_packing_lists",
        "list_alerts", "list_checks", "list_changes", "get_organization"}
    strays = [(tool, arguments, line) for tool, arguments, text in answers
              for line in text.splitlines() if STRAY.search(line)]
    assert strays == [], f"{len(strays)} lines, e.g. {strays[:5]}"


def test_at_risk_lines_read_as_the_docs_show(call):
    text = call("list_free_time_at_risk")
    heads = [line for line in text.splitlines() if not line.startswith(("  ", "More:"))]
    assert heads and all(re.fullmatch(r"shp_\d+ · SHIP-\S+ · AT RISK( · terms unknown)?( · active: .+)?", head)
                         for head in heads), heads[:3]


def test_a_cargo_weight_not_known_is_left_out_of_the_shipment_line():
    # The API answers null for a weight it cannot show (a NaN a writer stored, pallets without weights): the
    # summary says what is known, never "None kg net".
    from mcp_server.summaries import summarize

    shipment = {"object": "shipment", "id": "shp_1", "reference": "SHIP-1", "status": "in_transit", "revision": 2,
                "tracking": {"state": "active"}, "cargo": {"pallets": 3, "boxes": 120, "net_weight_kg": None}}
    text = summarize(shipment, "get_shipment")
    assert "  cargo 3 pallets, 120 boxes" in text.splitlines() and not STRAY.search(text), text
    shipment["cargo"]["net_weight_kg"] = 1354.5
    assert "  cargo 3 pallets, 120 boxes, 1354.5 kg net" in summarize(shipment, "get_shipment").splitlines()
