"""The application factory: defaults, then environment, then the caller's overrides."""
import logging
import os

from flask import Flask
from werkzeug.middleware.proxy_fix import ProxyFix

from api import (alerts, checks, documents, free_time, guard, openapi, organization, packing_lists, shipments,
                 timeline)
from api.context import release_conn
from api.errors import register_error_handlers
from api.middleware import JsonSuffix
from cli import register_commands
from models import db

DEFAULTS = {
    "DATABASE_URL": None,
    # Folder holding document files; the database stores each file's key in it.
    "STORAGE_DIR": str(db.PROJECT_DIR / "storage"),
    "RATE_LIMITS": {"window_seconds": 300, "per_token": 600, "per_ip": 1200, "anonymous_per_ip": 30},
    # Number of proxies in front of the service whose X-Forwarded-For hop is trusted.
    "TRUSTED_PROXIES": 0,
    # The service's own domain; it and its subdomains are refused as webhook hosts.
    "SERVICE_DOMAIN": "shiptrack.example",
    # Networks a webhook URL may resolve to despite not being public (tests, demos); off by default.
    "WEBHOOK_ALLOWED_NETWORKS": [],
    "WEBHOOK_CA_BUNDLE": None,
    "SMTP_HOST": None, "SMTP_PORT": 25, "SMTP_FROM": "webhooks@shiptrack.example",
    "STATEMENT_RECORDER": None,
}


def create_app(config=None):
    """Build the WSGI application."""
    app = Flask(__name__, static_folder=None)
    app.config.from_mapping(DEFAULTS)
    app.config["DATABASE_URL"] = os.environ.get("DATABASE_URL") or None
    app.config.from_prefixed_env("SHIPTRACK")
    app.config.from_mapping(config or {})
    app.config["DATABASE_URL"] = db.resolve_database_url(app.config["DATABASE_URL"])
    app.json.sort_keys = False
    app.json.compact = True

    # The only list of blueprints: /openapi.json describes whatever app.url_map holds, in this order.
    for blueprint in (organization.bp, shipments.bp, timeline.bp, free_time.bp, documents.bp, packing_lists.bp,
                      alerts.bp, checks.bp, openapi.bp):
        app.register_blueprint(blueprint)
    app.before_request(guard.guard_request)
    app.after_request(guard.add_version_header)
    app.teardown_request(release_conn)
    register_error_handlers(app)
    register_commands(app)

    app.wsgi_app = JsonSuffix(app.wsgi_app)
    if app.config["TRUSTED_PROXIES"]:
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=int(app.config["TRUSTED_PROXIES"]))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    return app
