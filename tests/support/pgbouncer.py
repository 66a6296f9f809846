"""A real PgBouncer (Debian's `pgbouncer`) in front of the test server, in session or transaction mode."""
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import quote, urlunsplit

import pytest
from psycopg2.extensions import parse_dsn

from tests.support.processes import free_port, stop, wait_for


def _listening(port):
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class PgBouncer:
    """PgBouncer on a free port of 127.0.0.1, forwarding every database to `server_url`'s server.

    It authenticates to the server as the server URL's user (and password); clients connect as that
    user with `auth_type = trust`, so URLs through it carry no password. Its default configuration
    otherwise: no `ignore_startup_parameters`, so a connection sending `options` is refused as in a
    deployment.
    """

    def __init__(self, server_url, mode, pool_size=None):
        # A folder of its own in /tmp: PgBouncer refuses to run as root, and the user it runs as instead
        # must reach its files (pytest's folders are root's alone).
        self.mode, self.folder, self.port = mode, Path(tempfile.mkdtemp(prefix="pgbouncer-")), free_port()
        folder = self.folder
        server = parse_dsn(server_url)
        self.user = server.get("user") or "postgres"
        host = server.get("host") or "127.0.0.1"
        forward = {"host": host, "port": server.get("port") or "5432", "user": self.user,
                   "password": server.get("password")}
        line = " ".join(f"{key}={value}" for key, value in forward.items() if value)
        (folder / "users.txt").write_text(f'"{self.user}" ""\n')
        self.config = folder / "pgbouncer.ini"
        self.config.write_text("\n".join([
            "[databases]", f"* = {line}", "", "[pgbouncer]", "listen_addr = 127.0.0.1", f"listen_port = {self.port}",
            "unix_socket_dir =", "auth_type = trust", f"auth_file = {folder / 'users.txt'}", f"pool_mode = {mode}",
            "max_client_conn = 500",
            # Through a transaction pooler many clients share few server sessions: two make that certain.
            f"default_pool_size = {pool_size or (2 if mode == 'transaction' else 20)}", f"logfile = {folder / 'pgbouncer.log'}",
            f"pidfile = {folder / 'pgbouncer.pid'}", *self._run_as(host), ""]))
        self.process = None

    def _run_as(self, host):
        """As root, the line making PgBouncer run as the embedded server's user (who may use its socket
        folder) or as nobody (TCP), and its folder theirs."""
        if os.geteuid() != 0:
            return []
        owner = pwd.getpwuid(os.stat(host).st_uid) if host.startswith("/") else pwd.getpwnam("nobody")
        for path in (self.folder, *self.folder.iterdir()):
            os.chown(path, owner.pw_uid, owner.pw_gid)
        return [f"user = {owner.pw_name}"]

    def start(self):
        """Start it and wait until it accepts connections (the test is skipped where it is not installed)."""
        program = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin")
        if program is None:
            shutil.rmtree(self.folder, ignore_errors=True)
            pytest.skip("Debian's pgbouncer is not installed (apt-get install pgbouncer; CI does)")
        self.process = subprocess.Popen([program, str(self.config)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        if not wait_for(lambda: _listening(self.port) or self.process.poll() is not None, 20) or \
                self.process.poll() is not None:
            raise RuntimeError(f"pgbouncer did not start: {self.log()}")
        return self

    def url(self, database_url, **replace):
        """`database_url`'s database through this PgBouncer (`replace`: user or database of the URL)."""
        database = replace.get("database") or parse_dsn(database_url)["dbname"]
        user = replace.get("user") or self.user
        return urlunsplit(("postgresql", f"{quote(user)}@127.0.0.1:{self.port}", "/" + quote(database), "", ""))

    def log(self):
        """What PgBouncer logged."""
        path = self.folder / "pgbouncer.log"
        return path.read_text() if path.exists() else ""

    def close(self):
        """Stop it (SIGTERM: it closes every connection)."""
        if self.process is not None:
            stop(self.process)
            self.process = None
        shutil.rmtree(self.folder, ignore_errors=True)

