"""What the worker answers itself, as the API's JSON errors: a request gunicorn could not read, or one that
had not arrived whole within REQUEST_SECONDS (docs/decisions.md, "HTTP edges"). serving.py writes them.
"""
import json
import ssl

from gunicorn.http import errors as http_errors

from api.errors import InvalidParameter
from api.observe import request_id

# A request's head and body must have arrived this many seconds after its worker thread started on it. Each
# read has the time left, not a time of its own: a client sending a byte a second would meet any per-read
# timeout and hold the thread for as long as it cares to.
REQUEST_SECONDS = 10

# gunicorn.workers.base.Worker.handle_error answers these as the client's fault (with HTML); so do we,
# as 400 invalid_parameter: the spec's status for "a parameter or header is invalid".
_HEADER_ERRORS = (http_errors.InvalidHeader, http_errors.InvalidHeaderName, http_errors.ObsoleteFolding,
                  http_errors.InvalidSchemeHeaders, http_errors.UnsupportedTransferCoding,
                  http_errors.ExpectationFailed)
_REQUEST_LINE_ERRORS = (http_errors.InvalidRequestLine, http_errors.InvalidRequestMethod,
                        http_errors.InvalidHTTPVersion)


class RequestTimeout(Exception):
    """A request that had not arrived whole REQUEST_SECONDS after its thread started reading it."""

    def __str__(self):
        return f"the request had not arrived whole after {REQUEST_SECONDS} s"


def client_error(exc, cfg):
    """The InvalidParameter answering a request gunicorn could not read, else None (our fault)."""
    # Subclasses of InvalidHeader and ParseException that gunicorn counts as its own or the app's fault.
    if isinstance(exc, (http_errors.InvalidResponseHeader, http_errors.InvalidResponseHeaderName,
                        http_errors.ConfigurationProblem)):
        return None
    if isinstance(exc, RequestTimeout):
        return InvalidParameter(f"The request did not arrive whole within {REQUEST_SECONDS} seconds.")
    if isinstance(exc, http_errors.LimitRequestLine):
        return InvalidParameter(f"The request line is longer than {cfg.limit_request_line} bytes; "
                                f"shorten the query.")
    if isinstance(exc, http_errors.LimitRequestHeaders):
        return InvalidParameter(f"Too many or too large headers: at most {cfg.limit_request_fields} headers "
                                f"of at most {cfg.limit_request_field_size} bytes each.")
    if isinstance(exc, _REQUEST_LINE_ERRORS):
        return InvalidParameter("The request line is not valid HTTP/1.x: METHOD SP path SP HTTP/1.1.")
    if isinstance(exc, _HEADER_ERRORS):
        # Not echoed: the offending line may be a credential.
        return InvalidParameter("A request header is not valid HTTP.")
    if isinstance(exc, ssl.SSLError):
        return InvalidParameter("The TLS handshake failed.")
    if isinstance(exc, http_errors.ParseException):  # chunked framing, proxy protocol, h2c preface
        return InvalidParameter("The request is not valid HTTP.")
    return None


def status_line(error):
    """`400 Bad Request` or `500 Internal Server Error`: the only two statuses this worker writes."""
    return f"{error.status} {'Bad Request' if error.status == 400 else 'Internal Server Error'}"


def error_bytes(error):
    """A complete HTTP/1.1 response carrying `error`'s JSON body; the connection closes after it."""
    body = json.dumps(error.body(), separators=(",", ":")).encode()
    head = (f"HTTP/1.1 {status_line(error)}\r\nConnection: close\r\nContent-Type: application/json\r\n"
            f"X-Request-Id: {request_id(None)}\r\nContent-Length: {len(body)}\r\n\r\n")
    return head.encode("latin-1") + body
