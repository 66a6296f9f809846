"""What runs around every request of the API, and of any app that serves beside it (POST /mcp)."""
from api import conditional, guard, observe
from api.context import release_conn
from api.errors import register_error_handlers


def install_request_hooks(app):
    """The guard before each request, the answer's headers after it, the connection's return, the error contract."""
    app.before_request(guard.guard_request)
    app.after_request(guard.add_version_header)
    app.after_request(guard.add_rate_limit_headers)
    # Registered last, so it runs first: a 304 gives its count back before the RateLimit headers are written.
    app.after_request(conditional.answer_conditionally)
    app.teardown_request(release_conn)
    app.after_request(observe.note_request)
    register_error_handlers(app)


def share_request_hooks(api, app):
    """Run every request hook of `api` on `app`'s requests too, those registered on `api` later included.

    `app`'s own error handlers (its blueprints') come first; the rest is the API's error contract. Flask's
    public preprocess_request, process_response and do_teardown_request read `api`'s hooks when each
    request runs. process_response also runs the request's after_this_request functions, which `app`
    runs itself as well: its views must not use after_this_request.
    """
    app.before_request(api.preprocess_request)
    app.after_request(api.process_response)
    app.teardown_request(api.do_teardown_request)
    register_error_handlers(app)
