"""The delivery settings, read from the settings table (config.py) the application reads too."""
from dataclasses import dataclass
from datetime import timedelta

from delivery import secret_key
from delivery import sender as sending
from models import db


# The settings of config.py that say how to connect (models.db.Target.from_config).
_CONNECTION_KEYS = ("DATABASE_POOLER", "DATABASE_POOL_SIZE", "DELIVERY_CONNECT_TIMEOUT", "DELIVERY_STATEMENT_TIMEOUT")


@dataclass
class Settings:
    """Everything a pass needs; `from_config` builds it from config.load_config()'s keys (no default here)."""

    database_url: str
    database: dict  # the connection settings of config.py that models.db.Target.from_config reads
    listen_url: str | None
    allowed_networks: object
    ca_bundle: str | None
    service_domain: str | None
    smtp_host: str | None
    smtp_port: int
    smtp_from: str
    workers: int
    per_endpoint: int
    lease: timedelta
    pass_seconds: float
    secret_keys: secret_key.SecretKeys
    rate_limit_window: int  # RATE_LIMITS' window_seconds: housekeeping prunes the windows that ended long ago

    @classmethod
    def from_config(cls, config, **overrides):
        """Settings from a configuration mapping (config.load_config(), or a Flask app's config)."""
        values = {
            "database_url": config["DATABASE_URL"],
            "database": {key: config[key] for key in _CONNECTION_KEYS},
            "listen_url": config["DATABASE_LISTEN_URL"],
            "allowed_networks": config["WEBHOOK_ALLOWED_NETWORKS"] or (),
            "ca_bundle": config["WEBHOOK_CA_BUNDLE"],
            "service_domain": config["SERVICE_DOMAIN"],
            "smtp_host": config["SMTP_HOST"],
            "smtp_port": int(config["SMTP_PORT"]),
            "smtp_from": config["SMTP_FROM"],
            "workers": int(config["WEBHOOK_WORKERS"]),
            "per_endpoint": int(config["WEBHOOK_PER_ENDPOINT"]),
            "lease": timedelta(seconds=float(config["WEBHOOK_LEASE_SECONDS"])),
            "pass_seconds": float(config["WEBHOOK_PASS_SECONDS"]),
            "secret_keys": secret_key.from_config(config),
            "rate_limit_window": int(config["RATE_LIMITS"]["window_seconds"]),
        }
        values.update(overrides)
        return cls(**values)

    @property
    def target(self):
        """Where and how the delivery script connects (models.db.Target).

        A commit lost in a database crash only means a delivery is sent again (receivers expect
        duplicates); not waiting for the WAL flush halves the cost of each turn. Rendered bodies are the
        exception (delivery/outbox.py sets it back on for them).
        """
        return db.Target.from_config(self.database, "delivery", url=self.database_url,
                                     settings=(("synchronous_commit", "off"),))

    @property
    def listen_target(self):
        """Where the LISTEN connection goes: DATABASE_LISTEN_URL (always direct), else the delivery target."""
        if self.listen_url:
            return db.Target.from_config({**self.database, "DATABASE_POOLER": None}, "delivery", url=self.listen_url)
        return self.target

    def make_sender(self, resolver=None, **deadlines):
        """A Sender applying these settings; `deadlines` (answer_seconds, total_seconds) only shorten the spec's."""
        return sending.Sender(ca_bundle=self.ca_bundle, allowed_networks=self.allowed_networks,
                              service_domain=self.service_domain, workers=self.workers, resolver=resolver,
                              **deadlines)
