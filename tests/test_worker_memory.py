"""gunicorn workers keep some freed memory at the top of the heap (serving.keep_heap_pad)."""
import runpy
import subprocess
import sys
from pathlib import Path

import serving

ROOT = Path(__file__).resolve().parent.parent

# Builds a page-sized text and its bytes 200 times, as a list request does, and prints the minor page
# faults that took.
PAGES = """
import resource, sys
sys.path.insert(0, {root!r})
import serving
if {pad}:
    assert serving.keep_heap_pad()
bodies = ["x" * 1800] * 100
def page():
    return "".join(('{{"object":"list","data":[', ",".join(bodies), "]}}")).encode()
for _ in range(20):
    page()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(200):
    page()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(pad):
    script = PAGES.format(root=str(ROOT), pad=pad)
    return int(subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True).stdout)


def test_page_sized_blocks_are_reused_without_faulting_their_pages_in_again():
    without, kept = _faults(False), _faults(True)
    assert without > 200 * 20  # glibc's defaults: the freed block's pages go back at every free
    assert kept < 50


def test_each_gunicorn_worker_keeps_the_pad(monkeypatch):
    calls = []
    monkeypatch.setattr(serving, "keep_heap_pad", lambda: calls.append("pad"))
    config = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    config["post_fork"](None, None)
    assert calls == ["pad"]
