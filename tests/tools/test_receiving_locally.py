"""docs/receiving-webhooks.md, "Testing locally", followed as written on a running demo: the page's Flask receiver
on this machine gets a certificate the demo trusts, is registered, passes `webhooks test`, receives the
simulator's events, and goes away with its endpoint and log.

The demo runs in a copy of the checkout (tests/support/demo_run.py). The page's shell blocks run there with
bash, in page order, as a reader types them in the terminals the page names: the second terminal's exports
hold for its later blocks. Two things differ from a reader's run, on purpose: the one value the page asks to
paste (the secret `webhooks add` printed) is pasted, and the receiver's port 8002 becomes a free one (other
tests run beside this one).
"""
import os
import re
import signal
import subprocess
import threading

import pytest

from tests.support import ROOT
from tests.support.demo_run import DemoRun, checkout_copy, demo_environment
from tests.support.processes import free_port, wait_for, wait_listening

pytestmark = pytest.mark.slow

PAGE = ROOT / "docs" / "receiving-webhooks.md"
BANNER_TOKEN = re.compile(r"^  Token +(sv_[A-Za-z0-9]{40}) ")
PAGE_PORT = "8002"


def section_blocks():
    """The ```sh blocks of the "Testing locally" section, in page order, each a list of lines."""
    section = PAGE.read_text().split("\n## Testing locally\n", 1)[1].split("\n## ", 1)[0]
    return [[line.strip() for line in block.splitlines() if line.strip()]
            for block in re.findall(r"^ *```sh\n(.*?)^ *```$", section, re.MULTILINE | re.DOTALL)]


def receiver_code():
    """The page's Flask receiver ("Verifying, in Python"), which the section has the reader save as receiver.py."""
    receivers = PAGE.read_text().split("## Polling instead of receiving", 1)[0]  # its poller is another block
    (block,) = re.findall(r"^```python\n(.*?)^```$", receivers, re.MULTILINE | re.DOTALL)
    return block


def run(checkout, lines):
    """Run `lines` in one bash, in the checkout, as the reader's terminal does; (exit status, output)."""
    result = subprocess.run(["bash", "-c", "set -e\n" + "\n".join(lines)], cwd=checkout, env=demo_environment(),
                            capture_output=True, text=True, timeout=120)
    return result.returncode, result.stdout + result.stderr


@pytest.fixture(scope="module")
def demo():
    """The demo running in a copy of the checkout, past its banner."""
    with checkout_copy() as checkout:
        run_ = DemoRun(checkout)
        try:
            assert run_.find(BANNER_TOKEN, 120) is not None, "\n".join(run_.lines[-40:])
            yield run_
        finally:
            run_.kill()


def test_the_page_has_the_steps_it_says(demo):
    settings, receiver, check, cleanup = section_blocks()
    assert settings[0] == ("export SHIPTRACK_WEBHOOK_ALLOWED_NETWORKS='[\"127.0.0.1/32\"]' "
                           "SHIPTRACK_WEBHOOK_CA_BUNDLE=.data/demo/ca.pem")
    assert [line.split()[3:5] for line in settings[1:]] == [["demo", "certificate"], ["webhooks", "add"]]
    assert receiver[0] == "export WEBHOOK_SECRET=whsec_..." and "--app receiver run" in receiver[1]
    assert [line.split()[3:5] for line in check + cleanup] == [["webhooks", "test"], ["webhooks", "attempts"],
                                                                ["webhooks", "remove"]]


def test_a_receiver_written_from_the_page_is_registered_tested_and_receives_the_simulators_events(demo):
    checkout, port = demo.checkout, str(free_port())
    settings, receiver_lines, check, cleanup = [[line.replace(PAGE_PORT, port) for line in block]
                                                for block in section_blocks()]
    # Second terminal: the settings, a certificate, the endpoint.
    status, output = run(checkout, settings)
    assert status == 0, output
    assert output.startswith("certificate .data/demo/localhost.pem and key .data/demo/localhost-key.pem for "
                             "127.0.0.1 and localhost, signed by the demo's CA .data/demo/ca.pem\n"), output
    endpoint, secret = re.fullmatch(r"(?s).*\n(whe_\d+) (whsec_[A-Za-z0-9+/]+=*)\n", output).groups()
    assert endpoint == "whe_2"  # the demo's own endpoint is whe_1, as the page says

    # Third terminal: the page's receiver saved as receiver.py, started with the pasted secret (its own
    # session, so that stopping it stops the flask process bash started).
    (checkout / "receiver.py").write_text(receiver_code())
    script = "\n".join(line.replace("whsec_...", secret) for line in receiver_lines)
    process = subprocess.Popen(["bash", "-c", script], cwd=checkout, env=demo_environment(), text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    received = []
    reader = threading.Thread(target=lambda: received.extend(line.rstrip("\n") for line in process.stdout),
                              daemon=True)
    reader.start()
    try:
        wait_listening(process, int(port), "the page's receiver", lambda: "\n".join(received))
        # Second terminal again: the test event is delivered, and the log shows it.
        status, output = run(checkout, settings[:1] + check)
        assert status == 0, output
        message = re.match(r"(msg_\d+) -> whe_2: delivered, HTTP 204 in \d+ ms\n", output)
        assert message, output
        message = message.group(1)
        assert re.search(rf"^\S+  {message} +webhook\.test +1 +test +succeeded +204 +\d+\n  to 127\.0\.0\.1$",
                         output, re.MULTILINE), output
        # The receiver printed it, then the simulator's events, which the demo's delivery process sends.
        assert wait_for(lambda: f"webhook.test {message}" in received, 30), received
        assert wait_for(lambda: any(re.fullmatch(r"(shipment\.[a-z_]+|alert\.created) msg_\d+", line)
                                    for line in received), 60), (received, demo.lines[-20:])
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)
        reader.join(10)
        process.stdout.close()

    # Done: the endpoint goes with its deliveries and log.
    status, output = run(checkout, settings[:1] + cleanup)
    assert (status, output) == (0, "whe_2 removed\n")
    status, output = run(checkout, [".venv/bin/flask --app app webhooks list --org acme"])
    assert status == 0 and "whe_1" in output and "whe_2" not in output, output
