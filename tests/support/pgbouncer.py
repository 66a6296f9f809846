"""A real PgBouncer (Debian's `pgbouncer`) in front of the test server, in session or transaction mode."""
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import quote, urlunsplit

import psycopg2
import pytest
from psycopg2.extensions import parse_dsn

from tests.support.processes import free_port, stop, wait_for

# The parameters PgBouncer itself sets on a server connection to each client's own values when it links them.
_TRACKED = ("application_name", "client_encoding", "DateStyle", "IntervalStyle", "TimeZone",
            "standard_conforming_strings")
# What a server connection carries from its earlier clients: settings SET in its session (source
# 'session' outside any SET LOCAL), beyond those PgBouncer sets itself, prepared statements and LISTENs.
# pg_trgm's settings are placeholders, missing from pg_settings, until a call of it loads the library.
_LEFT_SQL = """SELECT show_trgm(''), array(SELECT name || ' = ' || setting FROM pg_settings
                            WHERE source = 'session' AND name <> ALL(%s) ORDER BY name)
                   || array(SELECT 'prepared ' || name FROM pg_prepared_statements ORDER BY name)
                   || array(SELECT 'listening ' || pg_listening_channels()) AS left"""


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
        self.pool_size = pool_size or (2 if mode == "transaction" else 20)
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
            f"default_pool_size = {self.pool_size}", f"logfile = {folder / 'pgbouncer.log'}",
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

    def server_sessions(self, database_url):
        """What each server connection of `database_url`'s pool carries from earlier clients (a list each).

        As many clients as the pool has server connections, each in a transaction at once: each holds a
        different one (one PgBouncer opens now is new, and carries nothing).
        """
        clients = [psycopg2.connect(self.url(database_url)) for _ in range(self.pool_size)]
        try:
            found = []
            for client in clients:
                with client.cursor() as cur:
                    cur.execute(_LEFT_SQL, (list(_TRACKED),))
                    found.append(cur.fetchone()[1])
            return found
        finally:
            for client in clients:
                client.close()

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

