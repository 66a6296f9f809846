"""The service as operations.md and monitoring.md run it: gunicorn workers summed in /metrics, the access log,
haproxy, nginx, Prometheus.

haproxy runs docs/monitoring.md's own example (ports changed) in front of two gunicorn instances whose
database is reached through a TCP proxy that the test stops and starts: an outage on demand. Prometheus
runs its example against a web and a delivery process with their default settings.
"""
import csv
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

from config import DEFAULTS
from tests.support import ROOT, operations
from tests.support.factories import auth, make_org, make_token
from tests.support.processes import free_port, stop, wait_for
from tests.support.tcp_proxy import TcpProxy
from tests.support.webhooks import pass_process

HAPROXY = operations.HAPROXY
PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")
NGINX = operations.NGINX


@contextmanager
def web(database_url, tmp_path, name, workers=1, environ=None, **settings):
    """gunicorn with the project's gunicorn.conf.py; yields (base URL, its stdout: the access log).

    `environ` adds to (or, with None values, removes from) the environment it runs in.
    """
    port = free_port()
    env = {**os.environ, "DATABASE_URL": database_url,
           **{f"SHIPTRACK_{key}": json.dumps(value) for key, value in settings.items()}, **(environ or {})}
    env = {key: value for key, value in env.items() if value is not None}
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
    stats_socket = tmp_path / "haproxy.sock"
    try:
        with web(url, tmp_path, "web1", TRUSTED_PROXIES=1) as (one, _), \
                web(url, tmp_path, "web2", TRUSTED_PROXIES=1) as (two, _), \
                operations.haproxy(tmp_path, (one.removeprefix("http://"), two.removeprefix("http://")),
                                   stats_socket) as (front, haproxy):
            checked = {"web1", "web2"}

            def states_are(state):
                assert haproxy.poll() is None, (tmp_path / "haproxy.log").read_text()
                try:
                    states = server_states(stats_socket)
                except OSError:
                    return False
                return all(states[name] == state for name in checked)

            assert wait_for(lambda: states_are("UP"), 30), server_states(stats_socket)
            through = requests.get(f"{front}/readyz", timeout=10)
            assert (through.status_code, through.json()["status"]) == (200, "ready")

            proxy.stop()
            assert wait_for(lambda: states_are("DOWN"), 30), server_states(stats_socket)
            answer = requests.get(f"{front}/organization", timeout=10, headers={"X-Request-Id": "lb-1"})
            assert (answer.status_code, answer.headers["X-Request-Id"]) == (503, "lb-1")
            assert answer.json()["error"]["code"] == "service_unavailable"

            proxy.start()
            assert wait_for(lambda: states_are("UP"), 30), server_states(stats_socket)
    finally:
        proxy.stop()


@pytest.mark.skipif(NGINX is None, reason="nginx (Debian's package) is not installed")
def test_the_nginx_example_is_valid(tmp_path):
    config = operations.nginx_config((f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"), free_port(), tmp_path)
    (tmp_path / "nginx.conf").write_text(config)
    result = subprocess.run([NGINX, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"), "-e", "stderr"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert "test is successful" in result.stderr


@pytest.mark.slow
def test_instances_on_one_host_have_no_control_socket_to_share(database_url, tmp_path):
    """gunicorn's control socket would be one path for every instance of a user (stopping one removed it)."""
    home = tmp_path / "home"
    home.mkdir()
    environ = {"HOME": str(home), "XDG_RUNTIME_DIR": None}
    with web(database_url, tmp_path, "web1", environ=environ) as (one, _):
        with web(database_url, tmp_path, "web2", environ=environ) as (two, _):
            assert [requests.get(base + "/healthz", timeout=10).status_code for base in (one, two)] == [200, 200]
            assert list(home.iterdir()) == []
        assert requests.get(one + "/healthz", timeout=10).status_code == 200
    assert list(home.iterdir()) == []
    for name in ("web1", "web2"):
        assert "Control socket" not in (tmp_path / f"{name}-error.log").read_text()


def connect_from(address, base):
    """A socket to `base` (http://host:port) whose source address is `address` (any of 127.0.0.0/8 is this host)."""
    host, port = base.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.settimeout(10)
    sock.bind((address, 0))
    sock.connect((host, int(port)))
    return sock


def metrics_status(base, source, forwarded_for):
    """The status of GET /metrics sent from `source` with `X-Forwarded-For: forwarded_for`."""
    with connect_from(source, base) as sock:
        sock.sendall(f"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: {forwarded_for}\r\n"
                     f"Connection: close\r\n\r\n".encode())
        return int(sock.recv(65536).split(b" ", 2)[1])


@pytest.mark.slow
@pytest.mark.skipif(HAPROXY is None or NGINX is None, reason="haproxy and nginx (Debian's packages) are needed")
def test_with_trusted_proxies_only_the_front_may_reach_the_port(database_url, tmp_path):
    """What operations.md requires of the port, shown: a client there chooses its own address, through a front not.

    127.0.0.2 plays a client on another machine, and metrics are allowed to 127.0.0.1 alone.
    """
    with web(database_url, tmp_path, "web", TRUSTED_PROXIES=1, METRICS_ALLOWED_NETWORKS=["127.0.0.1/32"]) as (base, _):
        address = base.removeprefix("http://")
        assert metrics_status(base, "127.0.0.1", "127.0.0.1") == 200
        assert metrics_status(base, "127.0.0.2", "127.0.0.2") == 404
        assert metrics_status(base, "127.0.0.2", "127.0.0.1") == 200   # the port reached directly: forged
        with operations.haproxy(tmp_path, (address, address)) as (front, _haproxy):
            assert metrics_status(front, "127.0.0.2", "127.0.0.1") == 404
        with operations.nginx(tmp_path, (address, address)) as (front, _nginx):
            assert metrics_status(front, "127.0.0.2", "127.0.0.1") == 404


def prometheus_targets(port):
    """{job: (health, last error)} of a Prometheus's active targets, {} while it is not answering."""
    try:
        answer = requests.get(f"http://127.0.0.1:{port}/api/v1/targets", timeout=5).json()
    except requests.RequestException:
        return {}
    return {target["labels"]["job"]: (target["health"], target["lastError"])
            for target in answer["data"]["activeTargets"]}


@pytest.mark.slow
@pytest.mark.skipif(PROMETHEUS is None, reason="prometheus (Debian's package) is not installed")
def test_the_prometheus_example_scrapes_both_processes_as_they_are_by_default(database_url, ca_bundle, tmp_path):
    example = operations.example("yaml")
    targets = {job["job_name"]: [target for config in job["static_configs"] for target in config["targets"]]
               for job in yaml.safe_load(example)["scrape_configs"]}
    assert set(targets) == {"shiptrack-web", "shiptrack-delivery"}
    # What the example scrapes is what each process serves to with its defaults: loopback.
    allowed = [ipaddress.ip_network(network) for network in DEFAULTS["METRICS_ALLOWED_NETWORKS"]]
    web_hosts = {ipaddress.ip_address(target.rpartition(":")[0]) for target in targets["shiptrack-web"]}
    assert web_hosts and all(any(host in network for network in allowed) for host in web_hosts), targets
    assert {target.rpartition(":")[0] for target in targets["shiptrack-delivery"]} == {
        DEFAULTS["DELIVERY_METRICS_HOST"]}
    [web_target], [delivery_target] = targets["shiptrack-web"], targets["shiptrack-delivery"]
    delivery_port, port = free_port(), free_port()
    with web(database_url, tmp_path, "web") as (base, _), \
            pass_process(database_url, ca_bundle, "--watch", DELIVERY_METRICS_PORT=delivery_port) as delivery:
        config = (example.replace(web_target, base.removeprefix("http://"))
                  .replace(delivery_target, f"127.0.0.1:{delivery_port}")
                  .replace("/srv/shiptrack/deploy/prometheus/alerts.yml", str(ROOT / "deploy/prometheus/alerts.yml")))
        (tmp_path / "prometheus.yml").write_text("global:\n  scrape_interval: 1s\n" + config)
        with open(tmp_path / "prometheus.log", "w") as log:
            prometheus = subprocess.Popen([PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
                                           f"--storage.tsdb.path={tmp_path / 'data'}",
                                           f"--web.listen-address=127.0.0.1:{port}"],
                                          stdout=subprocess.DEVNULL, stderr=log)
        try:
            up = {"shiptrack-web": ("up", ""), "shiptrack-delivery": ("up", "")}
            assert wait_for(lambda: prometheus_targets(port) == up, 60), (
                prometheus_targets(port), (tmp_path / "prometheus.log").read_text()[-2000:])
        finally:
            stop(prometheus)
            delivery.send_signal(signal.SIGTERM)
            delivery.communicate(timeout=30)
