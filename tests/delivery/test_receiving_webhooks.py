"""docs/receiving-webhooks.md's two receivers, run as the page shows them, on a delivery the service really made.

A status change makes an event, a delivery pass signs and sends it to the test HTTPS receiver, and the body and
headers that arrived are given to the page's Python receiver (Flask, in process) and Node receiver (its own
process, plain HTTP on 127.0.0.1): each accepts the delivery once, de-duplicates a retry, and refuses a body
changed by one byte.
"""
import re
import shutil
import subprocess

import pytest
import requests

from tests.support import ROOT
from tests.support.factories import make_org, make_shipment
from tests.support.processes import free_port, stop, wait_listening
from tests.support.webhooks import add_endpoint, run_pass

PAGE = ROOT / "docs" / "receiving-webhooks.md"
NODE_MODULES = ROOT / ".ci" / "node" / "node_modules"
SENT = ("webhook-id", "webhook-timestamp", "webhook-signature", "Content-Type", "User-Agent")


def code_block(language):
    """The one ```language block of the page's receivers ("Verifying, in ..."; "Polling instead of receiving" has
    another Python block: tests/api/test_waiting_pollers.py runs it)."""
    receivers = PAGE.read_text().split("## Polling instead of receiving", 1)[0]
    (block,) = re.findall(rf"^```{language}\n(.*?)^```$", receivers, re.MULTILINE | re.DOTALL)
    return block


@pytest.fixture
def delivered(conn, receiver, settings):
    """(secret, body bytes, headers) of a real shipment.status_changed delivery, as the receiver got them."""
    org = make_org(conn, "acme")
    shipment = make_shipment(conn, org, status="draft")
    endpoint = add_endpoint(conn, org, receiver.url("/ok"))
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'validated' WHERE id = %s", (shipment,))
    run_pass(settings)
    (request,) = receiver.requests
    return endpoint["secret"], request["body"], {name: request["headers"][name] for name in SENT}


def tampered(body):
    """The body with one byte changed (the status, inside the signed bytes)."""
    assert b'"validated"' in body
    return body.replace(b'"validated"', b'"validatee"', 1)


def test_the_python_receiver_verifies_a_real_delivery(delivered, monkeypatch, capsys):
    secret, body, headers = delivered
    monkeypatch.setenv("WEBHOOK_SECRET", secret)
    namespace = {"__name__": "receiver"}
    exec(compile(code_block("python"), str(PAGE), "exec"), namespace)
    client = namespace["app"].test_client()

    first = client.post("/webhooks/shiptrack", data=body, headers=headers)
    again = client.post("/webhooks/shiptrack", data=body, headers=headers)
    changed = client.post("/webhooks/shiptrack", data=tampered(body), headers=headers)
    assert (first.status_code, again.status_code, changed.status_code) == (204, 204, 400)
    assert capsys.readouterr().out == f"shipment.status_changed {headers['webhook-id']}\n"


@pytest.fixture
def node_receiver(tmp_path, delivered):
    """The page's Node receiver listening on 127.0.0.1 with the delivery's secret; yields (URL, process)."""
    node = shutil.which("node")
    if node is None or not (NODE_MODULES / "standardwebhooks").exists():
        pytest.skip("node or standardwebhooks is not installed: run `npm ci --prefix .ci/node` (CI does)")
    (tmp_path / "receiver.mjs").write_text(code_block("js"))
    (tmp_path / "node_modules").symlink_to(NODE_MODULES)      # where `import ... from "standardwebhooks"` looks
    port = free_port()
    process = subprocess.Popen([node, "receiver.mjs"], cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True,
                               env={"PATH": "/usr/bin:/bin", "WEBHOOK_SECRET": delivered[0], "PORT": str(port)})
    try:
        wait_listening(process, port, "the Node receiver", process.stdout.read)
        yield f"http://127.0.0.1:{port}/webhooks/shiptrack", process
    finally:
        stop(process)
        process.stdout.close()


def test_the_node_receiver_verifies_a_real_delivery(delivered, node_receiver):
    _secret, body, headers = delivered
    url, process = node_receiver
    statuses = [requests.post(url, data=data, headers=headers, timeout=10).status_code
                for data in (body, body, tampered(body))]
    assert statuses == [204, 204, 400]
    stop(process)
    assert process.stdout.read() == f"shipment.status_changed {headers['webhook-id']}\n"
