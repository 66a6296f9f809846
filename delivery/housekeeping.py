"""What the delivery process does besides delivering, as services (delivery/service.py): housekeeping
(retention, and pruning the rate-limit table the API counts requests in) and e-mails about failing and
disabled endpoints. Each runs when a cron pass starts, and every minute under `--watch`.
"""
import logging
import time

from api.ids import PREFIXES, format_id
from delivery import mailer, retry
from delivery.service import Service
from models import db, endpoint_health, events, rate_limits, webhook_deliveries, webhooks

log = logging.getLogger("delivery")

EVERY_SECONDS = 60.0  # under --watch; a cron pass runs them once at its start


class Scheduled(Service):
    """A service whose turn comes at start and then every `every` seconds."""

    def __init__(self, link, settings, clock, every=EVERY_SECONDS):
        super().__init__()
        self.link, self.settings, self.clock, self.every = link, settings, clock, every
        self.next_at = 0.0

    def due(self, now):
        """True once the interval has passed since the last turn began."""
        return self.running and now >= self.next_at

    def turn(self):
        """Do the work; a turn cut by a lost connection waits for the next interval, as a finished one does."""
        self.next_at = time.monotonic() + self.every
        self.work(self.link.conn)
        return 0

    def work(self, conn):
        """The service's work on `conn`."""
        raise NotImplementedError


class Housekeeping(Scheduled):
    """Keeps the tables small: retention of attempts and finished events, old rate-limit windows."""

    name = "housekeeping"

    def work(self, conn):
        """Delete what retention and the rate-limit window no longer need."""
        delete_old(conn, self.clock())
        with db.transaction(conn):
            rate_limits.prune(conn, self.settings.rate_limit_window)


class Email(Scheduled):
    """E-mails the admins about failing and disabled endpoints (notify_endpoint_admins)."""

    name = "e-mail"

    def work(self, conn):
        """Send what is waiting to be sent."""
        notify_endpoint_admins(conn, self.settings, self.clock)


def delete_old(conn, now):
    """Retention: 30 days of attempts and finished events."""
    before = now - retry.RETENTION
    with db.transaction(conn):
        attempts = webhook_deliveries.delete_old_attempts(conn, before)
        old = events.delete_old_events(conn, before)
    if attempts or old:
        log.info("retention deleted attempts=%s events=%s", attempts, old)


def notify_endpoint_admins(conn, settings, clock):
    """E-mail the admins and owners about endpoints failing for 24 hours and endpoints the 3-day rule disabled."""
    now = clock()
    _email(conn, settings, clock, "failing", "endpoint failing for 24 hours",
           lambda: endpoint_health.claim_unwarned(conn, now, retry.WARN_AFTER, retry.FAILURE_RUN_GAP),
           lambda endpoint, recipients: mailer.failing_message(
               endpoint, retry.disables_at(endpoint["failing_since"]), recipients, settings.smtp_from),
           endpoint_health.mark_warned)
    _email(conn, settings, clock, "disabled", "endpoint disabled", lambda: endpoint_health.claim_unnotified(conn),
           lambda endpoint, recipients: mailer.disabled_message(endpoint, recipients, settings.smtp_from),
           endpoint_health.mark_notified)


def _email(conn, settings, clock, kind, what, claim, message, mark):
    """Send one e-mail per claimed endpoint and mark it; without SMTP, log and leave it for later."""
    if not settings.smtp_host:
        with db.transaction(conn):
            for endpoint in claim():
                log.warning("%s but SHIPTRACK_SMTP_HOST is not set; admins not e-mailed endpoint_id=%s",
                            what, format_id(PREFIXES["webhook_endpoint"], endpoint["id"]))
        return
    with db.transaction(conn):
        for endpoint in claim():
            recipients = webhooks.admin_emails(conn, endpoint["organization_id"])
            if recipients:
                try:
                    mailer.send(settings.smtp_host, settings.smtp_port, message(endpoint, recipients))
                except OSError as error:  # smtplib errors are OSErrors; try again next pass
                    log.error("%s-endpoint e-mail failed endpoint_id=%s error=%r",
                              kind, format_id(PREFIXES["webhook_endpoint"], endpoint["id"]), error)
                    continue
            mark(conn, endpoint["id"], clock())
            log.info("admins e-mailed (%s) endpoint_id=%s recipients=%s",
                     what, format_id(PREFIXES["webhook_endpoint"], endpoint["id"]), len(recipients))
