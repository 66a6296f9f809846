"""gunicorn settings for every way the service is started (Procfile, dev.py, README, tests): `gunicorn -c gunicorn.conf.py`.

Command-line options (--workers, --bind, logs) still override these; see docs/decisions.md, "HTTP edges".
"""
# Requests gunicorn refuses before the application sees them get the JSON error body, not HTML.
worker_class = "serving.JsonErrorWorker"

# The longest request line the description allows is about 7,700 bytes (all of GET /shipments'
# parameters at their longest, percent-encoded; tests/test_http_limits.py computes it), above
# gunicorn's default of 4094. 8190 is the most gunicorn accepts short of "unlimited".
limit_request_line = 8190
# The longest header the API reads is `Authorization: Bearer sv_<40 characters>` (65 bytes); gunicorn's
# default bounds any one header line, and the header count, well above what a client needs.
limit_request_field_size = 8190
limit_request_fields = 100


def when_ready(server):
    """Once per start, in the master: one line if the webhook secrets' key is missing or wrong (docs/secret-key.md)."""
    from delivery import secret_key

    secret_key.report_for_service()
