"""Schemathesis fuzzes every operation of /openapi.json on the demo data with all its checks: no failure."""
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.config._auth import OpenAPIAuthConfig
from schemathesis.config._operations import OperationConfig
from schemathesis.generation.feedback import FeedbackSources
from schemathesis.pytest._test_builder import build_operation_test
from werkzeug.test import Client

from api.openapi import build_spec
from app import create_app
from models import db

load_all_checks()
# Every built-in check (the CLI's `--checks all`); nothing is excluded.
ALL_CHECKS = CHECKS.get_all()

# The description is built without a database (what /openapi.json serves, `flask openapi print`); the
# requests go to the demo data's app. schemathesis.pytest.from_fixture would load it from the served
# document but fails on pytest 9 (it reads request.node._nodeid, which pytest 9 no longer has).
schema = schemathesis.openapi.from_dict(build_spec(create_app({"DATABASE_URL": "postgresql://unused/"})))
# The spec: unknown query parameters are ignored. So a request with one is valid, not "negative" data
# the API should reject (negative_data_rejection would otherwise demand a 400 for `?x=1`).
schema.config.generation.update(allow_extra_parameters=False)
# A cursor is a place in one database's history: one ahead of every change the database has made (another
# database's, or kept from before a restore) has the shape of any other and is refused by what the database
# holds, as a 400 on `since` (docs/sync.md). GET /changes alone may therefore answer valid data with a 400.
schema.config.operations.operations.append(OperationConfig.from_dict({
    "include-path": "/changes",
    "checks": {"positive_data_acceptance": {"expected-statuses": ["2xx", "3xx", "400", "401", "403", "404", "409",
                                                                   "429", "5xx"]}}}))


class BufferedClient(Client):
    """werkzeug's test client reading each response whole, which closes it (a sent file too)."""

    def open(self, *args, **kwargs):
        """Client.open with buffered=True."""
        # schemathesis's WSGI transport reads the body but never closes the response, which
        # leaves the file of GET /documents/{id}/file open (a ResourceWarning, an error here).
        return super().open(*args, **{**kwargs, "buffered": True})


def latest_event(url):
    """The id of the demo's newest listed event (GET /events would show it first)."""
    conn = db.connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT max(id) AS id FROM events WHERE state = 'rendered' AND type <> 'webhook.test'")
            return f"msg_{cur.fetchone()['id']}"
    finally:
        conn.close()


# Statuses each operation answered, for the last test.
STATUSES = {}
PUBLIC = {f"{method.upper()} {path}" for path, item in schema.raw_schema["paths"].items()
          for method, operation in item.items() if operation.get("security") == []}


# One pytest item per operation, built as @schema.parametrize() builds them (every phase: examples, coverage,
# fuzzing). Not @schema.parametrize() itself: under pytest 9 its items share one node id, so pytest-xdist
# runs only one of them. build_operation_test is the function that decorator uses (schemathesis is pinned).
OPERATIONS = [result.ok() for result in schema.get_all_operations()]


@pytest.mark.parametrize("operation", OPERATIONS, ids=[operation.label for operation in OPERATIONS])
def test_every_operation_keeps_its_contract(operation, demo_database):
    # Checks that send more requests (ignored_auth) use the schema's transport: WSGI once it has the app.
    operation.schema.app = demo_database.app
    # The token through the bearer scheme, not as a header, so a case generated without it (negative
    # data for the security requirement) is sent without it.
    token = demo_database.headers["Authorization"].removeprefix("Bearer ")
    operation.schema.config.auth.openapi = OpenAPIAuthConfig(schemes={"bearer": {"bearer": token}})
    session = BufferedClient(demo_database.app)
    # The seed drops the events its loading made, so the demo's few events have ids generated ids
    # practically never hit: GET /events/{webhook_event_id} is given the latest one to answer 200.
    # (tests/api/test_event_history.py covers its 404s.)
    operation.schema.config.parameters["path.webhook_event_id"] = latest_event(demo_database.url)

    @settings(max_examples=25, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def keeps_its_contract(case):
        response = case.call_and_validate(app=demo_database.app, session=session, checks=ALL_CHECKS)
        STATUSES.setdefault(case.operation.label, set()).add(response.status_code)

    build_operation_test(config=schema.config, operation=operation, test_func=keeps_its_contract, given_kwargs={},
                         feedback=FeedbackSources())()


def test_every_operation_was_answered_with_success_and_with_errors():
    # The checks accept a 401 or 404 as the answer to valid data; the token and the example ids worked.
    assert len(STATUSES) == len(OPERATIONS)
    for label, statuses in STATUSES.items():
        assert 200 in statuses, (label, statuses)
        # Every operation needing a token also met a refused case.
        assert label in PUBLIC or statuses & {400, 401, 404}, (label, statuses)
