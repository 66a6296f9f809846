#!/usr/bin/env python3
"""The README's commands: `python3 dev.py demo` runs the API with demo data; `python3 dev.py test` runs the tests.

Needs only Python 3.11+. Each command makes `.venv` and installs requirements.txt (again only
when it changed). With DATABASE_URL unset, an embedded PostgreSQL keeps its data in `.data/`.
"""
import hashlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PYTHON = VENV / "bin" / "python"
REQUIREMENTS = ROOT / "requirements.txt"
STAMP = VENV / ".requirements.sha256"


def ensure_venv():
    """Create .venv and install the pinned requirements when they changed."""
    if sys.version_info < (3, 11):
        sys.exit("Python 3.11 or newer is needed.")
    if not PYTHON.exists():
        print("creating .venv", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    if not STAMP.exists() or STAMP.read_text() != digest:
        print("installing requirements.txt into .venv", flush=True)
        subprocess.run([str(PYTHON), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "-r", str(REQUIREMENTS)], check=True)
        STAMP.write_text(digest)


def in_venv():
    """Whether this process already runs on the project's virtualenv."""
    return Path(sys.prefix).resolve() == VENV.resolve()


def reexec():
    """Run this same command again on the virtualenv's Python."""
    os.execv(str(PYTHON), [str(PYTHON), str(Path(__file__)), *sys.argv[1:]])


def flask(*args, capture=False):
    """Run `flask --app app ...` with the current environment."""
    command = [str(PYTHON), "-m", "flask", "--app", "app", *args]
    if capture:
        return subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.PIPE, text=True).stdout.strip()
    subprocess.run(command, check=True, cwd=ROOT)
    return None


def database_url():
    """DATABASE_URL, else the embedded server's (started now, stopped when this process ends)."""
    sys.path.insert(0, str(ROOT))
    from models.db import resolve_database_url

    url = resolve_database_url()
    os.environ["DATABASE_URL"] = url
    return url


def free_port():
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_gunicorn(port, workers):
    """Start gunicorn serving the app on 127.0.0.1:port and wait until it answers."""
    process = subprocess.Popen([str(VENV / "bin" / "gunicorn"), "-c", "gunicorn.conf.py",
                                "--workers", str(workers), "--bind", f"127.0.0.1:{port}",
                                "--access-logfile", "-", "app:create_app()"],
                               cwd=ROOT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/openapi.json", timeout=1)
            return process
        except OSError:
            if process.poll() is not None:
                sys.exit("gunicorn exited during start-up")
            time.sleep(0.3)
    process.terminate()
    sys.exit("gunicorn did not answer within 30 seconds")


def demo():
    """Schema, demo data, a fresh token, then the API on 127.0.0.1 until Ctrl-C."""
    database_url()
    flask("db", "init")
    flask("demo", "seed")
    token = flask("tokens", "create", "--org", "acme", "--user", "owner@acme.example", "--name", "demo",
                  "--expires", "30d", "--replace", capture=True)
    port = int(os.environ.get("PORT", "8000"))
    server = start_gunicorn(port, workers=int(os.environ.get("WEB_CONCURRENCY", "2")))
    print(f"\nThe API runs on http://127.0.0.1:{port} with demo data (organization acme).\n"
          f"Token: {token}\nTry:\n"
          f"  curl -s -H 'Authorization: Bearer {token}' 'http://127.0.0.1:{port}/shipments?limit=2'\n"
          f"Press Ctrl-C to stop.\n", flush=True)
    try:
        server.wait()
    except KeyboardInterrupt:
        server.terminate()
        server.wait()


def test(args):
    """Run the whole test suite on every core (extra arguments go to pytest; `-n 0` runs in one process)."""
    # A module's tests stay on one worker (--dist loadfile), so a module-scoped database is filled once.
    parallel = [] if any(arg == "-n" or arg.startswith(("-n", "--numprocesses")) for arg in args) \
        else ["-n", "auto", "--dist", "loadfile"]
    # The embedded server and its database are made here, once, before the workers start: they all
    # reuse it through DATABASE_URL, and it stops when this process ends.
    database_url()
    result = subprocess.run([str(PYTHON), "-m", "pytest", *parallel, *args], cwd=ROOT)
    sys.exit(result.returncode)


def smoke():
    """Boot the embedded default (or DATABASE_URL), serve through gunicorn and answer one request."""
    database_url()
    flask("db", "init")
    slug = f"smoke{int(time.time())}"
    flask("orgs", "create", "--name", "Smoke", "--slug", slug, "--owner", f"owner@{slug}.example")
    token = flask("tokens", "create", "--org", slug, "--user", f"owner@{slug}.example", "--name", "smoke",
                  "--expires", "30d", capture=True)
    port = free_port()
    server = start_gunicorn(port, workers=1)
    try:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/organization",
                                         headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read().decode()
            assert response.status == 200 and f'"slug":"{slug}"' in body, body
        print(f"smoke: GET /organization answered 200 from {os.environ['DATABASE_URL'].split('?')[0]}")
    finally:
        server.terminate()
        server.wait()


COMMANDS = {"demo": demo, "smoke": smoke}


def main():
    """Dispatch `dev.py demo|test|smoke`."""
    if len(sys.argv) < 2 or sys.argv[1] not in {*COMMANDS, "test"}:
        sys.exit("usage: python3 dev.py demo | test [pytest args] | smoke")
    if not in_venv():
        ensure_venv()
        reexec()
    if sys.argv[1] == "test":
        test(sys.argv[2:])
    COMMANDS[sys.argv[1]]()


if __name__ == "__main__":
    main()
