"""`python3 dev.py demo` run as a user runs it, in a copy of the checkout: its output read line by line as it comes.

The copy shares the checkout's .venv and has no .data/, so the demo's embedded PostgreSQL keeps its data in the
copy and never meets the suite's; the demo runs with DATABASE_URL and SHIPTRACK_* unset, on free ports.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

import psutil

from tests.support import ROOT
from tests.support.processes import free_port, wait_for


def demo_environment():
    """The test's environment without what would point the demo elsewhere (DATABASE_URL, SHIPTRACK_*)."""
    return {name: value for name, value in os.environ.items()
            if name != "DATABASE_URL" and not name.startswith("SHIPTRACK_")}


@contextmanager
def checkout_copy():
    """A copy of the checkout without .data/ (and what is made at run time), on the same .venv.

    Not under pytest's tmp_path: as root the embedded server runs as another user, who must be able to reach
    its data folder, and every pytest session starting on the machine makes pytest's folder private again.
    """
    folder = Path(tempfile.mkdtemp(prefix="shiptrack-demo-"))
    copy = folder / "checkout"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".data", ".venv", ".git", "storage", "node_modules",
                                                               "__pycache__", ".pytest_cache", "results"))
    (copy / ".venv").symlink_to((ROOT / ".venv").resolve())
    try:
        yield copy
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class DemoRun:
    """One `python3 dev.py demo` in `checkout`, its output read line by line as it comes."""

    def __init__(self, checkout, port=None):
        self.checkout = checkout
        self.port, self.receiver_port = port or free_port(), free_port()
        env = demo_environment()
        env.update(PORT=str(self.port), DEMO_RECEIVER_PORT=str(self.receiver_port), DEMO_SIMULATE_EVERY="1",
                   WEB_CONCURRENCY="1")
        # SIGHUP as a terminal leaves it, even when the suite runs under nohup (which makes it ignored, and an
        # ignored signal stays ignored across exec): dev.py keeps running under nohup on purpose.
        ignored = signal.signal(signal.SIGHUP, signal.SIG_DFL)
        try:
            self.process = subprocess.Popen([sys.executable, "dev.py", "demo"], cwd=checkout, env=env, text=True,
                                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        finally:
            signal.signal(signal.SIGHUP, ignored)
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        with self.process.stdout:
            for line in self.process.stdout:
                self.lines.append(line.rstrip("\n"))

    def find(self, pattern, seconds):
        """The first match of `pattern` in the output within `seconds` (None if none)."""
        found = []

        def seen():
            exited = self.process.poll() is not None
            found.extend(m for m in map(pattern.match, list(self.lines)) if m)
            assert found or not exited, "\n".join(self.lines[-40:])
            return bool(found)

        return found[0] if wait_for(seen, seconds) else None

    def base(self):
        """The API's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def started(self):
        """Every process it runs now (children, grandchildren) and the embedded postmaster."""
        pids = {child.pid for child in psutil.Process(self.process.pid).children(recursive=True)}
        return pids | {int((self.checkout / ".data" / "pg" / "postmaster.pid").read_text().split()[0])}

    def stop(self, signum):
        """Send `signum` to dev.py alone; its exit status (None if it has not exited within the 10 s allowed)."""
        self.process.send_signal(signum)
        try:
            return self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return None

    def kill(self):
        """Clean up after a failed test: end dev.py and everything it started, the postmaster with a fast shutdown."""
        if self.process.poll() is None:
            pids = self.started()
            self.process.kill()
            for pid in pids:
                try:
                    psutil.Process(pid).send_signal(signal.SIGINT)
                except psutil.NoSuchProcess:
                    pass
            self.process.wait()
