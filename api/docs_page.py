"""GET /docs: the reference for people, Swagger UI rendering /openapi.json, every asset served from here."""
import importlib.resources

from flask import Blueprint, Response, send_from_directory

from api.apidoc import get_route

bp = Blueprint("docs_page", __name__)

# The Swagger UI dist as the pinned swagger-ui-py wheel ships it (Swagger UI 5.x: 5 is the first to render
# OpenAPI 3.1). Nothing is fetched from elsewhere: the page works offline and leaks no request.
SWAGGER_UI = importlib.resources.files("swagger_ui") / "static"
# Files of that dist the page loads; any other name is an unknown route (404), not a directory listing.
SWAGGER_ASSETS = ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png")
INIT_SCRIPT = "docs-init.js"

# No inline script or style and no other origin: Swagger UI sets styles through the DOM (allowed without
# 'unsafe-inline'), its icons are data: URIs in its CSS, and "Try it out" calls this same origin.
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                           "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
# An hour, like /openapi.json. Neither the page nor its files count toward the anonymous per-IP limit (api/guard.py).
CACHE_CONTROL = "public, max-age=3600"

# Relative URLs, so the page also works behind a proxy that serves the API under a path prefix.
PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Shipment Tracking API reference</title>
<link rel="icon" type="image/png" href="docs/favicon-32x32.png">
<link rel="stylesheet" href="docs/swagger-ui.css">
<script src="docs/swagger-ui-bundle.js" defer></script>
<script src="docs/docs-init.js" defer></script>
</head>
<body>
<div id="swagger-ui"></div>
</body>
</html>
"""

# validatorUrl null: by default Swagger UI sends the description to validator.swagger.io for a badge.
# BaseLayout: the standalone layout's top bar lets a visitor load any URL into the page.
INIT = """window.ui = SwaggerUIBundle({
  url: "openapi.json",
  dom_id: "#swagger-ui",
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
  validatorUrl: null,
  deepLinking: true,
  supportedSubmitMethods: ["get", "head"]
});
"""


@get_route(bp, "/docs", {"type": "string"}, media_types=("text/html",), response_description="An HTML page.",
           public=True)
def get_docs_page():
    """This description as a page for people (no token needed).

    Swagger UI rendering `/openapi.json`, with every asset served by the service. Paste a token under
    Authorize to try operations from the page.
    """
    return Response(PAGE, mimetype="text/html",
                    headers={"Content-Security-Policy": CONTENT_SECURITY_POLICY, "Cache-Control": CACHE_CONTROL})


# Left out of /openapi.json: these are the page's files (their names follow the Swagger UI release), not
# part of the API a client programs against. The rule still goes through the guard like every route.
@get_route(bp, f"/docs/<any({', '.join(repr(name) for name in (*SWAGGER_ASSETS, INIT_SCRIPT))}):asset>", None, public=True,
           include_in_description=False)
def get_docs_asset(asset):
    """One file of the reference page (or, for `/docs/`, the way to the page)."""
    if asset is None:
        # An empty body without a type, not werkzeug's HTML one: only the page itself answers text/html.
        response = Response(status=308, headers={"Location": "/docs"})
        del response.headers["Content-Type"]
        return response
    if asset == INIT_SCRIPT:
        return Response(INIT, mimetype="text/javascript", headers={"Cache-Control": CACHE_CONTROL})
    return send_from_directory(str(SWAGGER_UI), asset, max_age=3600)


# `/docs/`, the page's address with the slash a person often types: a permanent redirect to `/docs` (its
# relative asset URLs would not resolve from `/docs/`). The same endpoint as the files, so it is public
# and left out of the description like them; every other `/docs/...` stays an unknown route.
bp.add_url_rule("/docs/", endpoint="get_docs_asset", view_func=get_docs_asset, defaults={"asset": None},
                methods=["GET"], provide_automatic_options=False)
