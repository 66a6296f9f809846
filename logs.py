"""Log lines as text or as one JSON object per line, each naming the id of the request it belongs to.

configure_logging installs this for the API, its CLI and the delivery script; gunicorn.conf.py
names `logs.GunicornLogger` so that gunicorn's own lines and its access log follow the same format.
"""
import contextvars
import logging
import re
import time
from urllib.parse import quote

import pythonjsonlogger.json
from gunicorn import glogging

from config import load_config

# The X-Request-Id of the request this thread serves (api/observe.py sets it around each request).
REQUEST_ID = contextvars.ContextVar("request_id", default=None)
# WSGI environ keys the access log reads: set by api/observe.py and by an after_request hook.
ENVIRON_REQUEST_ID = "shiptrack.request_id"
ENVIRON_ROUTE = "shiptrack.route"
ENVIRON_TOKEN_ID = "shiptrack.token_id"

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
# A token as `tokens create` makes it: never written to a log, wherever a client put it (a path, a bad header).
TOKEN = re.compile(r"sv_[A-Za-z0-9]{40}")
REDACTED_TOKEN = "sv_[redacted]"
# gunicorn's messages quoting a header line, a header's name or value, or unread bytes it refused
# (gunicorn/http/errors.py): a malformed line may hold a credential in any form, so the quote goes whole.
REFUSED_BYTES = re.compile(
    r"(Invalid HTTP Header|Invalid HTTP header name|Obsolete line folding is unacceptable|Unsupported transfer "
    r"coding|Unable to comply with expectation|No more data after|Expected HTTP/2 connection preface, got)"
    r"""(:? )b?(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")
REDACTED_BYTES = r"\1\2[not shown]"
# C0, DEL and C1 controls: a newline forges a line, ESC drives a terminal, NUL makes grep call a log binary.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# What a URL path carries as it is (RFC 3986's pchar and "/"): any other character of a value taken from the
# request (a space, a control, "%", a byte beyond ASCII) is percent-encoded in the text access line.
URL_AS_IS = "/:@!$&'()*+,;=-._~"
_WRITTEN_AS_IS = re.compile(f"[A-Za-z0-9{re.escape(URL_AS_IS)}]*")
# The access fields a client chooses (the address too, through a trusted proxy's header); the others are the
# service's own (a route is a URL rule, a probe's path or `unmatched`).
FROM_REQUEST = frozenset({"remote_addr", "method", "path"})
FORMATS = ("text", "json")
# LogRecord's own attributes; anything else on a record came through `extra` and is a field of its own.
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class RequestIdFilter(logging.Filter):
    """Puts the current request's id on every record (None outside a request)."""

    def filter(self, record):
        """Always keeps the record."""
        if getattr(record, "request_id", None) is None:
            record.request_id = REQUEST_ID.get()
        return True


def redact(text):
    """`text` without tokens and without the request bytes gunicorn quotes when it refuses a header."""
    # Substring tests first: every request writes an access line, and most lines hold neither.
    if "sv_" in text:
        text = TOKEN.sub(REDACTED_TOKEN, text)
    if "'" in text or '"' in text:
        text = REFUSED_BYTES.sub(REDACTED_BYTES, text)
    return text


def _escape_control(match):
    return f"\\x{ord(match.group()):02x}"


class RedactFilter(logging.Filter):
    """Keeps tokens, refused header lines and control characters out of every line (message, fields, traceback)."""

    def filter(self, record):
        """Always keeps the record, rewritten when it held any of those."""
        message = record.getMessage()
        cleaned = redact(message)
        if not cleaned.isprintable():
            cleaned = CONTROL.sub(_escape_control, cleaned)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        for key in vars(record).keys() - _RECORD_ATTRIBUTES:  # the fields given as `extra`
            value = getattr(record, key)
            if isinstance(value, str) and "sv_" in value:
                setattr(record, key, TOKEN.sub(REDACTED_TOKEN, value))
        if record.exc_info:  # formatted once here, so that every handler writes the redacted text
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


class TextFormatter(logging.Formatter):
    """The text line, ending in ` request_id=<id>` inside a request."""

    def __init__(self):
        super().__init__(TEXT_FORMAT)

    def format(self, record):
        """The line, plus the request id when there is one."""
        line = super().format(record)
        request_id = getattr(record, "request_id", None)
        if request_id is None:
            return line
        first, newline, rest = line.partition("\n")  # after the message, before a traceback
        return f"{first} request_id={request_id}{newline}{rest}"


class JsonFormatter(pythonjsonlogger.json.JsonFormatter):
    """One JSON object per line: time, level, logger, pid, message, request_id, the record's extra fields, exception."""

    def __init__(self):
        super().__init__("{asctime}{levelname}{name}{process}{message}", style="{", json_default=str,
                         rename_fields={"asctime": "time", "levelname": "level", "name": "logger",
                                        "process": "pid", "exc_info": "exception"},
                         reserved_attrs=sorted(_RECORD_ATTRIBUTES))

    def process_log_record(self, log_record):
        """No request_id outside a request; the traceback (a string field, never a second line) last."""
        if log_record.get("request_id", "") is None:
            del log_record["request_id"]
        if "exception" in log_record:
            log_record["exception"] = log_record.pop("exception")
        return log_record

    def formatTime(self, record, datefmt=None):
        """UTC, ISO 8601 with milliseconds."""
        seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        return f"{seconds}.{int(record.msecs):03d}Z"


def make_formatter(log_format):
    """The formatter of a LOG_FORMAT setting; anything but the two known names is refused."""
    if log_format not in FORMATS:
        raise ValueError(f"SHIPTRACK_LOG_FORMAT must be one of {', '.join(FORMATS)}, not {log_format!r}")
    return JsonFormatter() if log_format == "json" else TextFormatter()


def configure_logging(log_format="text"):
    """One log format (the LOG_FORMAT setting) for the service, its CLI and the delivery script."""
    logging.basicConfig(level=logging.INFO, handlers=[make_handler(log_format)])


def make_handler(log_format, stream=None):
    """A stream handler (stderr) with the format, the request-id filter and the redacting one."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(make_formatter(log_format))
    handler.addFilter(RequestIdFilter())
    handler.addFilter(RedactFilter())
    return handler


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
