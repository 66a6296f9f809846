"""The HTTP API in process (the Flask test client over a real database): one module per resource, and the
rules every request follows (authentication, versions, rate limits, conditional requests, errors, logs)."""
