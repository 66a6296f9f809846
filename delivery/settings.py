"""The delivery settings, read from the settings table (config.py) the application reads too."""
from dataclasses import dataclass
from datetime import timedelta

from delivery import secret_key
from delivery import sender as sending


@dataclass
class Settings:
    """Everything a pass needs; `from_config` builds it from config.load_config()'s keys (no default here)."""

    database_url: str
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

    @classmethod
    def from_config(cls, config, **overrides):
        """Settings from a configuration mapping (config.load_config(), or a Flask app's config)."""
        values = {
            "database_url": config["DATABASE_URL"],
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
        }
        values.update(overrides)
        return cls(**values)

    def make_sender(self, resolver=None, **deadlines):
        """A Sender applying these settings; `deadlines` (answer_seconds, total_seconds) only shorten the spec's."""
        return sending.Sender(ca_bundle=self.ca_bundle, allowed_networks=self.allowed_networks,
                              service_domain=self.service_domain, workers=self.workers, resolver=resolver,
                              **deadlines)
