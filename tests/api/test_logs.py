"""Log lines: text or JSON, each naming its request's id; a 500's traceback with it."""
import io
import json
import logging

import pytest

import logs
from tests.support.apps import make_app
from tests.support.factories import auth, make_org, make_token
from tests.support.processes import free_port


@pytest.fixture
def json_log():
    """Everything logged meanwhile, as the JSON lines LOG_FORMAT=json writes."""
    stream = io.StringIO()
    handler = logs.make_handler("json", stream)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    finally:
        root.removeHandler(handler)


def test_log_lines_of_a_request_name_its_id(json_log):
    client = make_app(f"postgresql://127.0.0.1:{free_port()}/none?connect_timeout=2").test_client()
    client.get("/organization", headers={"X-Request-Id": "r-down"})
    lines = [line for line in json_log() if line["logger"] == "api.errors"]
    assert lines and all(line["request_id"] == "r-down" for line in lines)
    assert lines[0]["message"].startswith("database unreachable, answered 503")


def test_a_500_logs_its_traceback_with_the_request_id(database_url, conn, json_log, monkeypatch):
    token = make_token(conn, make_org(conn))
    app = make_app(database_url, TESTING=False)

    def broken(*_args, **_kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr("api.organization.resource", broken)
    response = app.test_client().get("/organization", headers=auth(token, **{"X-Request-Id": "r-500"}))
    assert (response.status_code, response.json["error"]["code"]) == (500, "internal_error")
    assert response.headers["X-Request-Id"] == "r-500"
    [line] = [line for line in json_log() if line["level"] == "ERROR"]
    assert line["request_id"] == "r-500"
    assert "RuntimeError: a bug" in line["exception"] and "Traceback" in line["exception"]


def test_text_lines_end_with_the_request_id():
    record = logging.LogRecord("api", logging.WARNING, __file__, 1, "lost %s", ("it",), None)
    record.request_id = "r-1"
    assert logs.TextFormatter().format(record).endswith(" WARNING api lost it request_id=r-1")


def test_an_unknown_log_format_is_refused():
    with pytest.raises(ValueError, match="SHIPTRACK_LOG_FORMAT must be one of text, json, not 'xml'"):
        logs.make_formatter("xml")


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_no_token_or_control_character_is_written_in_a_message_a_field_or_a_traceback(log_format):
    stream = io.StringIO()
    handler = logs.make_handler(log_format, stream)
    logger = logging.getLogger("tests.redacted")
    logger.addHandler(handler)
    token = "sv_" + "a1" * 20
    try:
        raise ValueError(f"bad {token}")
    except ValueError:
        logger.exception("seen %s at\n%s", token, "\x1b[2J", extra={"path": f"/{token}"})
    finally:
        logger.removeHandler(handler)
    written = stream.getvalue()
    assert token not in written and "\x1b" not in written
    if log_format == "json":
        [entry] = [json.loads(line) for line in written.splitlines()]
        assert (entry["message"], entry["path"]) == ("seen sv_[redacted] at\\x0a\\x1b[2J", "/sv_[redacted]")
        assert entry["exception"].startswith("Traceback")
        assert entry["exception"].endswith("ValueError: bad sv_[redacted]")
    else:
        first, *traceback = written.splitlines()
        assert first.endswith(" ERROR tests.redacted seen sv_[redacted] at\\x0a\\x1b[2J")
        assert traceback[0] == "Traceback (most recent call last):" and traceback[-1] == "ValueError: bad sv_[redacted]"
