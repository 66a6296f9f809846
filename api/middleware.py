"""WSGI middleware: the optional `.json` suffix on every path."""


class JsonSuffix:
    """Serve `/x.json` as `/x`; any other extension stays in the path and so finds no route (404)."""

    # Paths whose own name ends in .json.
    KEEP = frozenset({"/openapi.json"})

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path.endswith(".json") and path not in self.KEEP:
            environ["PATH_INFO"] = path[: -len(".json")]
        return self.app(environ, start_response)
