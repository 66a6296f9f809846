"""gunicorn workers reuse the memory a request freed (serving.keep_freed_memory)."""
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

import serving

ROOT = Path(__file__).resolve().parent.parent

# Builds a text of `size` bytes and its bytes 200 times, as a list request does, and prints the minor
# page faults that took.
PAGES = """
import resource, sys
sys.path.insert(0, {root!r})
import serving
if {keep}:
    assert serving.keep_freed_memory()
bodies = ["x" * ({size} // 100)] * 100
def page():
    return "".join(('{{"object":"list","data":[', ",".join(bodies), "]}}")).encode()
for _ in range(20):
    page()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(200):
    page()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(keep, size):
    script = PAGES.format(root=str(ROOT), keep=keep, size=size)
    return int(subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True).stdout)


@pytest.mark.parametrize("size", [180_000, 1_000_000, 2_000_000])
def test_page_sized_blocks_are_reused_without_faulting_their_pages_in_again(size):
    """A page of 100 shipments is about 180 KB; a page of events with large bodies can be a few MB."""
    without, kept = _faults(False, size), _faults(True, size)
    assert without > 200 * 20  # glibc's defaults: the freed blocks' pages go back to the system
    assert kept < 50


def test_each_gunicorn_worker_keeps_the_pad(monkeypatch):
    calls = []
    monkeypatch.setattr(serving, "keep_freed_memory", lambda: calls.append("kept"))
    config = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    config["post_fork"](None, None)
    assert calls == ["kept"]
