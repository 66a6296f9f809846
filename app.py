"""The application factory: settings from config.py (defaults, environment, overrides), blueprints, handlers."""
from flask import Flask
from werkzeug.middleware.proxy_fix import ProxyFix

from api import (alerts, changes, checks, docs_page, documents, events, free_time, observe, openapi, organization,
                 packing_lists, shipments, timeline)
from api.hooks import install_request_hooks
from api.middleware import JsonSuffix
from cli import register_commands
from config import load_config
from delivery import secret_key
from logs import configure_logging
from mcp_server import http as mcp_http
from models import db


def create_app(config=None):
    """Build the WSGI application."""
    app = Flask(__name__, static_folder=None)
    app.config.update(load_config(config))
    app.config["DATABASE_URL"] = db.resolve_database_url(app.config["DATABASE_URL"])
    app.extensions["database"] = db.Target.from_config(app.config, "api")  # checks DATABASE_POOLER now
    app.json.sort_keys = False
    app.json.compact = True

    # The only list of blueprints: /openapi.json describes whatever app.url_map holds, in this order.
    for blueprint in (organization.bp, shipments.bp, timeline.bp, free_time.bp, documents.bp, packing_lists.bp,
                      alerts.bp, checks.bp, events.bp, changes.bp, openapi.bp, docs_page.bp):
        app.register_blueprint(blueprint)
    install_request_hooks(app)
    register_commands(app)

    app.wsgi_app = JsonSuffix(app.wsgi_app)
    # POST /mcp (docs/agents.md): an app of its own running these same hooks, so url_map stays the API's GETs.
    app.wsgi_app = mcp_http.mount(app)
    # Around everything but ProxyFix: /healthz, /readyz, /metrics, X-Request-Id and the request metrics.
    app.wsgi_app = observe.Observe(app)
    if app.config["TRUSTED_PROXIES"]:
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=int(app.config["TRUSTED_PROXIES"]))
    configure_logging(app.config["LOG_FORMAT"])
    # The webhook secrets' key (docs/secret-key.md), for the commands; gunicorn.conf.py checks it at start.
    app.extensions["secret_keys"] = secret_key.from_config(app.config)
    return app
