"""gunicorn settings for every way the service is started (Procfile, dev.py, README, tests): `gunicorn -c gunicorn.conf.py`.

Command-line options (--workers, --bind, logs) still override these; see docs/decisions.md, "HTTP edges".
"""
import atexit
import os
import re
import shutil
import tempfile
from pathlib import Path
from urllib.parse import quote

from gunicorn import glogging

from config import load_config
from logs import ENVIRON_REQUEST_ID, ENVIRON_ROUTE, ENVIRON_TOKEN_ID, RedactFilter, RequestIdFilter, make_formatter

# gunicorn's threaded worker: each request is read whole, within serving.REQUEST_SECONDS, by one of a
# worker's threads before the application runs it, so a slow client holds a thread for that long at most,
# not the process. What gunicorn refuses itself gets the JSON error body, not HTML.
worker_class = "serving.JsonErrorWorker"
# Threads per worker: enough for many slow clients at once beside the requests the application runs (at
# most DATABASE_POOL_SIZE at a time per worker: serving.py). An idle thread costs a little memory only.
threads = 32
# No max_requests: a worker lives as long as its master. Each worker that dies leaves its metric files, which
# every scrape reads until the next start (about 1 ms each: docs/performance.md); workers replaced on a
# schedule would make that grow without end.
# Each response closes its connection: a front that keeps idle connections to an instance longer than
# gunicorn does would now and then send a request on one gunicorn has just closed (a 502 for a POST).
keepalive = 0
# Every byte of a response is written by socket.sendall, which serving.py holds to the response's write
# deadline; sendfile(2) would wait on a client that reads slowly with a timeout per wait, not for the whole.
# A file is then read and written in 8 KiB pieces (werkzeug's FileWrapper): docs/performance.md has the cost.
sendfile = False

# No control socket (gunicorn's `gunicornc`): every instance on a host would share the one default path,
# and stopping one removes the others'. Instances are managed with signals (systemd, a Procfile manager).
control_socket_disable = True

# The longest request line the description allows is about 7,700 bytes (all of GET /shipments'
# parameters at their longest, percent-encoded; tests/contract/test_http_limits.py computes it), above
# gunicorn's default of 4094. 8190 is the most gunicorn accepts short of "unlimited".
limit_request_line = 8190
# The longest header the API reads is `Authorization: Bearer sv_<40 characters>` (65 bytes); gunicorn's
# default bounds any one header line, and the header count, well above what a client needs.
limit_request_field_size = 8190
limit_request_fields = 100
# gunicorn takes SCRIPT_NAME and PATH_INFO from request headers when the peer is a trusted proxy (127.0.0.1
# by default), and a proxy passes its clients' headers on: none is taken, so a header named with "_" is
# dropped (gunicorn's header_map) and no client moves the application's root or makes a 500 by trying.
forwarder_headers = ""

# The access log, on by default: one line per request with its route, status, duration, request id and
# token id (GunicornLogger, at the end of this file), in the LOG_FORMAT setting's format like every other line.
accesslog = "-"


# Metrics (api/metrics.py): every worker writes its counts to files in one folder that any worker's
# GET /metrics sums. prometheus_client picks that mode when it is first imported, so the folder is
# named here, before anything imports it. An operator's PROMETHEUS_MULTIPROC_DIR is emptied at start
# (counts of an earlier run would be summed in); without one, a private folder is made and removed at exit.
# A folder made by another gunicorn started from this environment (the tests start many) is that
# instance's own, not the operator's; one made by this master is kept when a reload reads this file again.
PRIVATE_MARK = "GUNICORN_SHIPTRACK_PRIVATE_METRICS_DIR"


def private_metrics_dir():
    """This instance's own metrics folder (made now: every process inheriting the variable needs it), or None."""
    current = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
    if current and current != os.environ.get(PRIVATE_MARK):
        return None
    if current and Path(current).name.startswith(f"shiptrack-metrics-{os.getpid()}-"):
        return current
    return tempfile.mkdtemp(prefix=f"shiptrack-metrics-{os.getpid()}-")


def remove_private_metrics_dir(pid=os.getpid()):
    """At the exit of the process that made it (gunicorn's master, or a program that read this file)."""
    if PRIVATE_METRICS_DIR and os.getpid() == pid:  # forked workers inherit this hook; they leave it be
        shutil.rmtree(PRIVATE_METRICS_DIR, ignore_errors=True)


PRIVATE_METRICS_DIR = private_metrics_dir()
if PRIVATE_METRICS_DIR:
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = os.environ[PRIVATE_MARK] = PRIVATE_METRICS_DIR
    atexit.register(remove_private_metrics_dir)


def on_starting(server):
    """Make an operator's metrics folder, or empty it, before any worker starts."""
    folder = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    for stale in folder.glob("*.db"):
        stale.unlink()


def post_worker_init(worker):
    """Each worker waits at most DATABASE_CLIENT_TIMEOUT for any answer of the database (models/deadline.py),
    and builds the MCP server before it serves (its first POST /mcp would wait seconds for it)."""
    from mcp_server import http as mcp_http
    from models import deadline

    deadline.install(load_config()["DATABASE_CLIENT_TIMEOUT"])
    mcp_http.prepare(worker.app.wsgi())  # the Flask app as loaded (worker.wsgi is serving.py's wrapper of it)


def when_ready(server):
    """Once per start, in the master: one line if the webhook secrets' key is missing or wrong (docs/secret-key.md)."""
    from delivery import secret_key

    secret_key.report_for_service()


# What a URL path carries as it is (RFC 3986's pchar and "/"): any other character of a value taken from the
# request (a space, a control, "%", a byte beyond ASCII) is percent-encoded in the text access line.
URL_AS_IS = "/:@!$&'()*+,;=-._~"
_WRITTEN_AS_IS = re.compile(f"[A-Za-z0-9{re.escape(URL_AS_IS)}]*")
# The access fields a client chooses (the address too, through a trusted proxy's header); the others are the
# service's own (a route is a URL rule, a probe's path or `unmatched`).
FROM_REQUEST = frozenset({"remote_addr", "method", "path"})


class GunicornLogger(glogging.Logger):
    """gunicorn's logger in the service's format; the access line names route, request id and token id."""

    def setup(self, cfg):
        """gunicorn's handlers, then the service's formatter and filter on each of them."""
        super().setup(cfg)
        log_format = load_config()["LOG_FORMAT"]
        for logger in (self.error_log, self.access_log):
            for handler in logger.handlers:
                # gunicorn's own text lines keep its format, which people and tools already read.
                if log_format == "json":
                    handler.setFormatter(make_formatter(log_format))
                handler.addFilter(RequestIdFilter())
                handler.addFilter(RedactFilter())

    def access(self, resp, req, environ, request_time):
        """One line per request: who, method, path, route, status, duration, request id, token id, bytes.

        An access_log_format given to gunicorn (--access-logformat) is used as gunicorn uses it.
        """
        if self.cfg.access_log_format != self.cfg.settings["access_log_format"].default:
            return super().access(resp, req, environ, request_time)
        if not self.access_log_enabled:
            return
        fields = access_fields(resp, environ, request_time)
        shown = {key: _text_value(value) if key in FROM_REQUEST else "-" if value is None else value
                 for key, value in fields.items()}
        text = " ".join(f"{key}={value}" for key, value in shown.items() if key not in FROM_REQUEST)
        message = f"{shown['remote_addr']} {shown['method']} {shown['path']} {text}"
        self.access_log.info(message, extra=fields)


def access_fields(resp, environ, request_time):
    """The access log's fields of one response (the token's id only: a token itself is never logged)."""
    return {"remote_addr": environ.get("REMOTE_ADDR", "-"), "method": environ.get("REQUEST_METHOD"),
            "path": environ.get("PATH_INFO"), "route": environ.get(ENVIRON_ROUTE),
            "status": _status_code(resp), "duration_ms": round(request_time.total_seconds() * 1000, 2),
            "request_id": environ.get(ENVIRON_REQUEST_ID), "token_id": environ.get(ENVIRON_TOKEN_ID),
            "bytes": getattr(resp, "sent", None)}


def _text_value(value):
    """A field of the text access line: `-` for none, else percent-encoded beyond what a URL path holds as is."""
    if value is None:
        return "-"
    if _WRITTEN_AS_IS.fullmatch(value):
        return value
    # WSGI strings are the request's bytes read as latin-1: encoded back, they are what the client sent.
    return quote(value.encode("latin-1", "backslashreplace"), safe=URL_AS_IS)


def _status_code(resp):
    # gunicorn's own refusals (serving.py) set the status line without start_response's status_code.
    code = getattr(resp, "status_code", None)
    if code is None and resp.status:
        code = int(str(resp.status).split()[0])
    return code


# Named here, below the class: this file is gunicorn's to read, not a module another can import.
logger_class = GunicornLogger
