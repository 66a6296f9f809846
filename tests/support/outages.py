"""What the API answers while its database cannot be reached."""

UNAVAILABLE = {"error": {"type": "api_error", "code": "service_unavailable",
                         "message": "The service cannot reach its database right now. Retry after the number of "
                                    "seconds in Retry-After (5).",
                         "param": None}}


def assert_unavailable(response):
    """The spec's error object for a database that cannot be reached, with Retry-After and no rate-limit headers."""
    body = response.get_json() if hasattr(response, "get_json") else response.json()
    assert (response.status_code, body) == (503, UNAVAILABLE)
    assert response.headers["Retry-After"] == "5"
    assert "RateLimit" not in response.headers and "Service-Version" not in response.headers
