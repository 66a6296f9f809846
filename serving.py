"""The gunicorn worker: requests gunicorn refuses itself are answered with the API's JSON error body."""
import json
import ssl
from datetime import datetime

from gunicorn import util
from gunicorn.http import errors as http_errors
from gunicorn.http.wsgi import Response, default_environ
from gunicorn.workers.sync import SyncWorker

from api.errors import InternalError, InvalidParameter
from api.observe import request_id

# gunicorn.workers.base.Worker.handle_error answers these as the client's fault (with HTML); so do we,
# as 400 invalid_parameter: the spec's status for "a parameter or header is invalid".
_HEADER_ERRORS = (http_errors.InvalidHeader, http_errors.InvalidHeaderName, http_errors.ObsoleteFolding,
                  http_errors.InvalidSchemeHeaders, http_errors.UnsupportedTransferCoding,
                  http_errors.ExpectationFailed)
_REQUEST_LINE_ERRORS = (http_errors.InvalidRequestLine, http_errors.InvalidRequestMethod,
                        http_errors.InvalidHTTPVersion)


def client_error(exc, cfg):
    """The InvalidParameter answering a request gunicorn could not read, else None (our fault)."""
    # Subclasses of InvalidHeader and ParseException that gunicorn counts as its own or the app's fault.
    if isinstance(exc, (http_errors.InvalidResponseHeader, http_errors.InvalidResponseHeaderName,
                        http_errors.ConfigurationProblem)):
        return None
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


class JsonErrorWorker(SyncWorker):
    """gunicorn's sync worker; only the responses gunicorn writes itself differ (JSON, not HTML)."""

    def handle_error(self, req, client, addr, exc):
        """What Worker.handle_error does (log, access log, answer), with the spec's error body."""
        started = datetime.now()
        addr = addr or ("", -1)  # a unix socket has no peer address
        error = client_error(exc, self.cfg)
        if error is not None:
            self.log.warning("Invalid request from ip=%s: %s", addr[0], exc)
            if req is None and isinstance(exc, (http_errors.InvalidHeader, http_errors.InvalidHeaderName)):
                req = getattr(exc, "req", None)  # a header error may carry the request read so far
        else:
            self.log.exception("Error handling request %s", getattr(req, "uri", "(no URI read)"))
            error = InternalError("Something went wrong on our side. Try again later.")
        data = error_bytes(error)
        if req is not None:
            environ = default_environ(req, client, self.cfg)
            environ["REMOTE_ADDR"], environ["REMOTE_PORT"] = addr[0], str(addr[1])
            response = Response(req, client, self.cfg)
            response.status = status_line(error)
            response.response_length = len(data)
            self.log.access(response, req, environ, datetime.now() - started)
        try:
            util.write_nonblock(client, data)
        except Exception:
            self.log.debug("Failed to send error message.")
