"""The service as operations.md runs it: gunicorn workers summed in /metrics, the access log, haproxy and nginx.

haproxy runs docs/operations.md's own example (ports changed) in front of two gunicorn instances whose
database is reached through a TCP proxy that the test stops and starts: an outage on demand.
"""
import csv
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.support import ROOT
from tests.support.factories import auth, make_org, make_token
from tests.support.processes import free_port, stop, wait_for
from tests.support.tcp_proxy import TcpProxy

HAPROXY = shutil.which("haproxy")
PROMTOOL = shutil.which("promtool")
NGINX = shutil.which("nginx")


@contextmanager
def web(database_url, tmp_path, name, workers=1, **settings):
    """gunicorn with the project's gunicorn.conf.py; yields (base URL, its stdout: the access log)."""
    port = free_port()
    env = {**os.environ, "DATABASE_URL": database_url,
           **{f"SHIPTRACK_{key}": json.dumps(value) for key, value in settings.items()}}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    access, errors = tmp_path / f"{name}-access.log", tmp_path / f"{name}-error.log"
    command = [str(Path(sys.executable).parent / "gunicorn"), "-c", "gunicorn.conf.py", "-w", str(workers),
               "-b", f"127.0.0.1:{port}", "--error-logfile", str(errors), "app:create_app()"]
    with open(access, "w") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: _answers(f"http://127.0.0.1:{port}/healthz", process), 30), errors.read_text()
        yield f"http://127.0.0.1:{port}", access
    finally:
        stop(process)


def _answers(url, process):
    assert process.poll() is None, "gunicorn exited"
    try:
        return requests.get(url, timeout=5).status_code == 200
    except requests.RequestException:  # not listening yet, or a worker still booting on a busy machine
        return False


def scrape(base):
    """{(name, labels as a sorted tuple): value} of one GET /metrics."""
    response = requests.get(base + "/metrics", timeout=10)
    assert response.status_code == 200, response.text
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(response.text) for sample in family.samples}


def test_metrics_sum_every_worker_and_the_access_log_names_route_request_and_token(database_url, conn, tmp_path):
    token = make_token(conn, make_org(conn))
    key = ("shiptrack_http_requests_total", (("method", "GET"), ("route", "/organization"), ("status", "200")))
    with web(database_url, tmp_path, "web", workers=2, LOG_FORMAT="json",
             RATE_LIMITS={"window_seconds": 300, "per_token": 10000, "per_ip": 10000, "anonymous_per_ip": 10000}
             ) as (base, access):
        sent = 0

        def access_lines():
            return [json.loads(line) for line in access.read_text().splitlines()]

        def both_workers_served():
            nonlocal sent
            response = requests.get(base + "/organization", headers=auth(token, **{"X-Request-Id": f"a-{sent}"}),
                                    timeout=10)
            assert (response.status_code, response.headers["X-Request-Id"]) == (200, f"a-{sent}")
            sent += 1
            return len({line["pid"] for line in access_lines() if line.get("route") == "/organization"}) == 2

        assert wait_for(both_workers_served, 60)
        for _ in range(4):  # whichever worker answers the scrape, it sums both
            assert scrape(base)[key] == sent
        if PROMTOOL:
            lint = subprocess.run([PROMTOOL, "check", "metrics"], input=requests.get(base + "/metrics").content,
                                  capture_output=True, timeout=30)
            assert lint.returncode == 0, lint.stdout + lint.stderr
    lines = [line for line in access_lines() if line.get("route") == "/organization"]
    assert len(lines) == sent
    token_id = token_id_of(conn)
    for number, line in enumerate(sorted(lines, key=lambda line: int(line["request_id"][2:]))):
        assert {key: line[key] for key in ("logger", "method", "path", "status", "request_id", "token_id")} == {
            "logger": "gunicorn.access", "method": "GET", "path": "/organization", "status": 200,
            "request_id": f"a-{number}", "token_id": token_id}
        assert isinstance(line["duration_ms"], float)
    everything = access.read_text() + (tmp_path / "web-error.log").read_text()
    assert token not in everything


def token_id_of(conn):
    """The id of the one token in the database."""
    with conn.cursor() as cur:
        cur.execute("SELECT 'tok_' || id AS id FROM tokens")
        return cur.fetchone()["id"]


def haproxy_example():
    """The haproxy configuration of docs/operations.md, as written there."""
    text = (ROOT / "docs" / "operations.md").read_text()
    return re.search(r"```haproxy\n(.*?)```", text, re.S).group(1)


def server_states(stats_socket):
    """{server name: status} of the shiptrack_web backend, from haproxy's runtime API."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(5)
        sock.connect(str(stats_socket))
        sock.sendall(b"show stat\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    rows = csv.DictReader(data.decode().lstrip("# ").splitlines())
    return {row["svname"]: row["status"] for row in rows
            if row["pxname"] == "shiptrack_web" and row["svname"] not in ("FRONTEND", "BACKEND")}


@pytest.mark.slow
@pytest.mark.skipif(HAPROXY is None, reason="haproxy (Debian's package) is not installed")
def test_haproxy_marks_instances_down_while_their_database_is_unreachable(database_url, tmp_path):
    from psycopg2.extensions import parse_dsn

    target = parse_dsn(database_url)
    proxy = TcpProxy((target.get("host") or "127.0.0.1", int(target.get("port") or 5432))).start()
    url = proxy.url(database_url)
    front, stats_socket = free_port(), tmp_path / "haproxy.sock"
    try:
        with web(url, tmp_path, "web1", TRUSTED_PROXIES=1) as (one, _), \
                web(url, tmp_path, "web2", TRUSTED_PROXIES=1) as (two, _):
            config = haproxy_example().replace("bind :80", f"bind 127.0.0.1:{front}")
            for number, base in ((1, one), (2, two)):
                config = config.replace(f"10.0.0.1{number}:8000", base.removeprefix("http://"))
            assert "10.0.0." not in config
            (tmp_path / "haproxy.cfg").write_text(f"global\n    stats socket {stats_socket}\n\n{config}")
            with open(tmp_path / "haproxy.log", "w") as log:
                haproxy = subprocess.Popen([HAPROXY, "-db", "-f", str(tmp_path / "haproxy.cfg")],
                                           stdout=subprocess.DEVNULL, stderr=log)
            try:
                checked = {"web1", "web2"}

                def states_are(state):
                    assert haproxy.poll() is None, (tmp_path / "haproxy.log").read_text()
                    try:
                        states = server_states(stats_socket)
                    except OSError:
                        return False
                    return all(states[name] == state for name in checked)

                assert wait_for(lambda: states_are("UP"), 30), server_states(stats_socket)
                through = requests.get(f"http://127.0.0.1:{front}/readyz", timeout=10)
                assert (through.status_code, through.json()["status"]) == (200, "ready")

                proxy.stop()
                assert wait_for(lambda: states_are("DOWN"), 30), server_states(stats_socket)
                answer = requests.get(f"http://127.0.0.1:{front}/organization", timeout=10,
                                      headers={"X-Request-Id": "lb-1"})
                assert (answer.status_code, answer.headers["X-Request-Id"]) == (503, "lb-1")
                assert answer.json()["error"]["code"] == "service_unavailable"

                proxy.start()
                assert wait_for(lambda: states_are("UP"), 30), server_states(stats_socket)
            finally:
                stop(haproxy)
    finally:
        proxy.stop()


@pytest.mark.skipif(NGINX is None, reason="nginx (Debian's package) is not installed")
def test_the_nginx_example_is_valid(tmp_path):
    example = re.search(r"```nginx\n(.*?)```", (ROOT / "docs" / "operations.md").read_text(), re.S).group(1)
    temp = {name: tmp_path / name for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi")}
    for folder in temp.values():
        folder.mkdir()
    config = (f"pid {tmp_path}/nginx.pid;\nerror_log stderr;\nevents {{}}\nhttp {{\n"
              f"access_log off;\nclient_body_temp_path {temp['body']};\nproxy_temp_path {temp['proxy']};\n"
              f"fastcgi_temp_path {temp['fastcgi']};\nuwsgi_temp_path {temp['uwsgi']};\n"
              f"scgi_temp_path {temp['scgi']};\n"
              + example.replace("listen 80;", f"listen 127.0.0.1:{free_port()};") + "}\n")
    (tmp_path / "nginx.conf").write_text(config)
    result = subprocess.run([NGINX, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"), "-e", "stderr"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert "test is successful" in result.stderr
