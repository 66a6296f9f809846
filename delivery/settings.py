"""The delivery script's settings, read from the same configuration as the application."""
from dataclasses import dataclass, field
from datetime import timedelta

from delivery import sender as sending


@dataclass
class Settings:
    """Everything a pass needs; `from_config` reads the Flask app config (SHIPTRACK_* variables)."""

    database_url: str
    allowed_networks: object = ()
    ca_bundle: str | None = None
    service_domain: str | None = None
    smtp_host: str | None = None
    smtp_port: int = 25
    smtp_from: str = "webhooks@localhost"
    # Requests in flight at once, and per endpoint: a slow endpoint holds at most
    # `per_endpoint` workers, so the others keep theirs.
    workers: int = 128
    per_endpoint: int = 16
    # A claimed delivery not recorded within the lease is due again (a crashed pass).
    lease: timedelta = field(default=timedelta(minutes=5))
    # A cron pass stops claiming after this, then waits for its requests (at most 15 s more).
    pass_seconds: float = 45.0
    answer_seconds: float = sending.ANSWER_SECONDS
    total_seconds: float = sending.TOTAL_SECONDS

    @classmethod
    def from_config(cls, config, **overrides):
        """Settings from a Flask config mapping."""
        values = {
            "database_url": config["DATABASE_URL"],
            "allowed_networks": config.get("WEBHOOK_ALLOWED_NETWORKS") or (),
            "ca_bundle": config.get("WEBHOOK_CA_BUNDLE"),
            "service_domain": config.get("SERVICE_DOMAIN"),
            "smtp_host": config.get("SMTP_HOST"),
            "smtp_port": int(config.get("SMTP_PORT") or 25),
            "smtp_from": config.get("SMTP_FROM") or cls.smtp_from,
            "workers": int(config.get("WEBHOOK_WORKERS") or cls.workers),
            "per_endpoint": int(config.get("WEBHOOK_PER_ENDPOINT") or cls.per_endpoint),
        }
        values.update(overrides)
        return cls(**values)

    def make_sender(self, resolver=None):
        """A Sender applying these settings."""
        return sending.Sender(ca_bundle=self.ca_bundle, allowed_networks=self.allowed_networks,
                              service_domain=self.service_domain, answer_seconds=self.answer_seconds,
                              total_seconds=self.total_seconds, resolver=resolver)
