"""What a delivery run does besides delivering: retention, and e-mails about failing and disabled endpoints."""
import logging

from api.ids import PREFIXES, format_id
from delivery import mailer, retry
from models import db, endpoint_health, events, webhook_deliveries, webhooks

log = logging.getLogger("delivery")


def keep_tidy(conn, settings, clock):
    """Retention (30 days of attempts and finished events), then notify_endpoint_admins."""
    before = clock() - retry.RETENTION
    with db.transaction(conn):
        attempts = webhook_deliveries.delete_old_attempts(conn, before)
        old = events.delete_old_events(conn, before)
    if attempts or old:
        log.info("retention deleted attempts=%s events=%s", attempts, old)
    notify_endpoint_admins(conn, settings, clock)


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
