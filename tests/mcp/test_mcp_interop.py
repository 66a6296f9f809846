"""A client no one here wrote: the official TypeScript MCP SDK (pinned in .ci/node) against /mcp and `flask mcp`."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from tests.support import ROOT
from tests.support.apps import NO_RATE_LIMITS
from tests.support.processes import gunicorn

NODE = ROOT / ".ci" / "node"
SCRIPT = NODE / "mcp-interop.mjs"
INVALID_TOKEN = "The API token is invalid, expired or revoked, or its user left the organization."


@pytest.fixture(scope="module")
def node():
    """The node executable, with the SDK installed by `npm ci --prefix .ci/node` (CI does)."""
    executable = shutil.which("node")
    if executable is None or not (NODE / "node_modules" / "@modelcontextprotocol" / "sdk").exists():
        pytest.skip("node or @modelcontextprotocol/sdk is not installed: run `npm ci --prefix .ci/node` (CI does)")
    return executable


@pytest.fixture(scope="module")
def served(demo_database, tmp_path_factory):
    """gunicorn over the demo data; yields the base URL."""
    with gunicorn(demo_database.url, tmp_path_factory.mktemp("interop"), RATE_LIMITS=NO_RATE_LIMITS) as base:
        yield base


def interop(node, *arguments, env=None):
    result = subprocess.run([node, str(SCRIPT), *arguments], capture_output=True, text=True, timeout=120,
                            cwd=ROOT, env={**os.environ, **(env or {})})
    return result


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["http", "stdio"])
def test_the_typescript_sdk_lists_the_tools_calls_one_and_reads_a_shipment(kind, node, served, demo_database):
    token = demo_database.headers["Authorization"].removeprefix("Bearer ")
    shipment = requests.get(f"{served}/shipments", params={"limit": 1}, headers=demo_database.headers,
                            timeout=10).json()["data"][0]["id"]
    if kind == "http":
        result = interop(node, "http", f"{served}/mcp", token, shipment)
    else:
        result = interop(node, "stdio", str(Path(sys.executable).parent / "flask"), shipment,
                         env={"DATABASE_URL": demo_database.url, "SHIPTRACK_TOKEN": token,
                              "SHIPTRACK_RATE_LIMITS": json.dumps(NO_RATE_LIMITS)})
    assert result.returncode == 0, result.stdout + result.stderr
    answer = json.loads(result.stdout)
    assert answer["server"]["name"] == "shiptrack"
    tools = {tool["name"]: tool["required"] for tool in answer["tools"]}
    assert len(tools) == 12 and tools["get_shipment"] == ["shipment_id"] and tools["search_shipments"] == []
    assert not answer["call"].get("isError") and answer["call"]["content"][0]["text"].startswith(f"{shipment} · ")
    api = requests.get(f"{served}/shipments/{shipment}", headers=demo_database.headers, timeout=10).text.rstrip("\n")
    assert answer["full"]["content"][0]["text"] == api
    assert answer["resource"]["contents"][0]["text"] == api
    assert answer["missing"]["isError"] is True
    assert answer["missing"]["content"][0]["text"] == "resource_missing: No such shipment: 'shp_999999999'."
    assert answer["refused"]["code"] == -32002 and "No such shipment: 'shp_999999999'." in answer["refused"]["message"]


@pytest.mark.slow
def test_the_typescript_sdk_is_refused_with_the_apis_message(node, served):
    result = interop(node, "http", f"{served}/mcp", "sv_" + "x" * 40, "shp_1")
    assert result.returncode != 0
    assert INVALID_TOKEN in result.stderr, result.stderr
