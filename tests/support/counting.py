"""The statements each request runs, counted by the tests' own cursor (the query-count tests assert them).

A request's statements are those run on the connection it holds (`g.conn`), from taking it to giving
it back, without what a connection does once in its life (SET at connect, PREPARE): so every
request of a kind counts the same, every time. The guard's (a principal looked up, a reservation of the
rate limits: api/guard.py) are counted apart from the view's: how many a request sends depends on what
its process keeps, the view's never do.
"""
import dataclasses

from flask import g, has_request_context

from models import cursors

# Statements that are not a request's own work (see above), by how their text begins.
NOT_COUNTED = ("PREPARE ",)
COUNTS = "tests.statement_counts"
GUARD_COUNTS = "tests.guard_statement_counts"


class CountingCursor(cursors.Cursor):
    """The service's cursor, counting each statement on its connection and on the request holding it."""

    def execute(self, query, vars=None):
        if not (isinstance(query, str) and query.startswith(NOT_COUNTED)):
            conn = self.connection
            conn.statements = getattr(conn, "statements", 0) + 1
            if has_request_context() and g.get("conn") is conn:
                key = "statements" if g.get("viewing") else "guard_statements"
                g.setdefault(key, 0)
                setattr(g, key, getattr(g, key) + 1)
        return super().execute(query, vars)


def count_statements(app):
    """Make `app`'s connections count; each request that held one appends its count to statement_counts(app)."""
    app.extensions["database"] = dataclasses.replace(app.extensions["database"], cursor_factory=CountingCursor)
    counts = app.extensions[COUNTS] = []
    guard_counts = app.extensions[GUARD_COUNTS] = []

    @app.before_request
    def viewing():
        # Registered after the guard, so it runs once the guard has decided the request.
        g.viewing = True

    @app.teardown_request
    def record(_error=None):
        # Registered after the API's own teardown, so it runs before the connection goes back.
        if "statements" in g or "conn" in g:
            counts.append(g.pop("statements", 0))
        guard_counts.append(g.pop("guard_statements", 0))

    return app


def statement_counts(app):
    """The statements of each request `app` answered since the list was last cleared, in the order they ended."""
    return app.extensions[COUNTS]


def guard_statement_counts(app):
    """The guard's statements of each request `app` answered (every request, 0 when it sent none), in order."""
    return app.extensions[GUARD_COUNTS]
