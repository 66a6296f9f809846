"""CPU seconds of processes of this machine, read from /proc (for the benches; no project imports).

    python bench/proc_cpu.py postgres    # the local PostgreSQL server's, in whole seconds ("?" if none runs)
"""
import os
import subprocess
import sys
from pathlib import Path


def _stat_fields(pid):
    """The fields of /proc/<pid>/stat after the command name (index 11 is utime), or None when unreadable."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def cpu_seconds(pid):
    """CPU seconds (user + system) the process has used so far; None when unreadable (it has ended)."""
    fields = _stat_fields(pid)
    return None if fields is None else (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def postgres_server_cpu():
    """CPU seconds of the local PostgreSQL server: its live processes, plus the exited backends the
    postmaster (the oldest `postgres` process) reaped; None when no server runs here."""
    postmaster = _postgres_pids("-o")
    if not postmaster:
        return None
    total = sum(cpu_seconds(pid) or 0.0 for pid in _postgres_pids())
    fields = _stat_fields(postmaster[0])
    if fields is not None:
        total += (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
    return total


def _postgres_pids(*options):
    found = subprocess.run(["pgrep", *options, "-x", "postgres"], capture_output=True, text=True).stdout
    return [int(pid) for pid in found.split()]


if __name__ == "__main__":
    if sys.argv[1:] != ["postgres"]:
        sys.exit(__doc__)
    seconds = postgres_server_cpu()
    print("?" if seconds is None else round(seconds))
