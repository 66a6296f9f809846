"""Log lines as text or as one JSON object per line, each naming the id of the request it belongs to.

configure_logging installs this for the API, its CLI and the delivery script; gunicorn's logger
(gunicorn.conf.py, GunicornLogger) puts the same formatter and filters on gunicorn's own lines and its access log.
"""
import contextvars
import logging
import re
import time

import pythonjsonlogger.json

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
