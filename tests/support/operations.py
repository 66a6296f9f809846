"""docs/monitoring.md's examples run as written there (addresses changed) with Debian's haproxy and nginx."""
import re
import shutil
import subprocess
from contextlib import contextmanager

from tests.support import ROOT
from tests.support.processes import free_port, stop, wait_listening

HAPROXY = shutil.which("haproxy")
NGINX = shutil.which("nginx")
# The addresses of the two instances in both examples.
EXAMPLE_SERVERS = ("10.0.0.11:8000", "10.0.0.12:8000")


def example(language):
    """The text of monitoring.md's one code block in `language` (haproxy, nginx, yaml...)."""
    blocks = re.findall(rf"```{language}\n(.*?)```", (ROOT / "docs" / "monitoring.md").read_text(), re.S)
    assert len(blocks) == 1, f"monitoring.md has {len(blocks)} {language} blocks"
    return blocks[0]


def with_servers(config, servers):
    """`config` with the examples' two instances at `servers` (host:port each; one may serve both)."""
    for example_server, server in zip(EXAMPLE_SERVERS, servers, strict=True):
        config = config.replace(example_server, server)
    assert "10.0.0." not in config
    return config


def haproxy_config(servers, port, stats_socket=None):
    """The haproxy example listening on 127.0.0.1:port, with a runtime API socket if asked."""
    config = with_servers(example("haproxy"), servers).replace("bind :80", f"bind 127.0.0.1:{port}")
    assert f"127.0.0.1:{port}" in config
    return (f"global\n    stats socket {stats_socket}\n\n" if stats_socket else "") + config


def nginx_config(servers, port, tmp_path):
    """The nginx example listening on 127.0.0.1:port, inside the main context it needs, its files under tmp_path."""
    temp = {name: tmp_path / f"nginx-{name}" for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi")}
    for folder in temp.values():
        folder.mkdir(exist_ok=True)
    server = with_servers(example("nginx"), servers).replace("listen 80;", f"listen 127.0.0.1:{port};")
    assert f"127.0.0.1:{port}" in server
    return (f"pid {tmp_path}/nginx.pid;\nerror_log stderr;\ndaemon off;\nevents {{}}\nhttp {{\n"
            f"access_log off;\nclient_body_temp_path {temp['body']};\nproxy_temp_path {temp['proxy']};\n"
            f"fastcgi_temp_path {temp['fastcgi']};\nuwsgi_temp_path {temp['uwsgi']};\n"
            f"scgi_temp_path {temp['scgi']};\n{server}}}\n")


@contextmanager
def haproxy(tmp_path, servers, stats_socket=None):
    """Debian's haproxy running the example in front of `servers`; yields its base URL."""
    port = free_port()
    (tmp_path / "haproxy.cfg").write_text(haproxy_config(servers, port, stats_socket))
    with open(tmp_path / "haproxy.log", "w") as log:
        process = subprocess.Popen([HAPROXY, "-db", "-f", str(tmp_path / "haproxy.cfg")],
                                   stdout=subprocess.DEVNULL, stderr=log)
    try:
        wait_listening(process, port, "haproxy", lambda: (tmp_path / "haproxy.log").read_text())
        yield f"http://127.0.0.1:{port}", process
    finally:
        stop(process)


@contextmanager
def nginx(tmp_path, servers):
    """Debian's nginx running the example in front of `servers`; yields its base URL."""
    port = free_port()
    (tmp_path / "nginx.conf").write_text(nginx_config(servers, port, tmp_path))
    with open(tmp_path / "nginx.log", "w") as log:
        process = subprocess.Popen([NGINX, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"), "-e", "stderr"],
                                   stdout=subprocess.DEVNULL, stderr=log)
    try:
        wait_listening(process, port, "nginx", lambda: (tmp_path / "nginx.log").read_text())
        yield f"http://127.0.0.1:{port}", process
    finally:
        stop(process)
