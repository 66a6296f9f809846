"""What an attempt's outcome does: the retry policy, the delivery's next step, the attempt log, endpoint
health (the 3-day rule), and the e-mails to the admins about failing and disabled endpoints.
"""
import logging
import smtplib
from datetime import timedelta
from email.message import EmailMessage

from delivery.secret_key import NOT_SENT
from models import db, endpoint_health, webhook_deliveries, webhooks
from rendering.ids import PREFIXES, format_id

log = logging.getLogger("delivery")

# The retry policy (SPEC: Delivery and retries).
# Delay before each attempt after a failure of the previous one: 8 attempts in
# all, the first immediately, then 1 min, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h.
SCHEDULE = (
    timedelta(0),
    timedelta(minutes=1),
    timedelta(minutes=5),
    timedelta(minutes=30),
    timedelta(hours=2),
    timedelta(hours=5),
    timedelta(hours=10),
    timedelta(hours=10),
)
MAX_ATTEMPTS = len(SCHEDULE)

# An endpoint failing for more than this long is disabled; a day without a
# failed delivery restarts the count.
DISABLE_AFTER = timedelta(days=3)
FAILURE_RUN_GAP = timedelta(days=1)
# The admins are warned once a failure run has lasted this long (before the 3-day rule disables).
WARN_AFTER = timedelta(hours=24)

# Attempts (and finished events) are kept this long.
RETENTION = timedelta(days=30)


def next_attempt_at(attempt, attempted_at, max_attempts=MAX_ATTEMPTS):
    """When the attempt after a failed attempt number `attempt` (at `attempted_at`) is due; None when none is left."""
    if attempt >= min(max_attempts, MAX_ATTEMPTS):
        return None
    return attempted_at + SCHEDULE[attempt]


def failure_run(failing_since, last_failure_at, failed_at):
    """The start of the failure run after a failure at `failed_at` (a day without failures starts a new run)."""
    if failing_since is None or last_failure_at is None or failed_at - last_failure_at > FAILURE_RUN_GAP:
        return failed_at
    return failing_since


def disables_at(failing_since):
    """When a failure run started at `failing_since` disables the endpoint: at the first failure after this."""
    return None if failing_since is None else failing_since + DISABLE_AFTER


def should_disable(failing_since, failed_at):
    """True when failures have kept coming for more than DISABLE_AFTER."""
    return failing_since is not None and failed_at - failing_since > DISABLE_AFTER


def _health(endpoints, results):
    """Replay failures in time order over each endpoint's failure run; returns endpoints to disable."""
    disable = {}
    for result in sorted(results, key=lambda r: r.finished_at):
        if result.delivery.reason == "test" or result.outcome.error == NOT_SENT:
            continue  # a test event never counts toward disabling, nor a secret this process cannot open
        endpoint = endpoints.get(result.delivery.endpoint_id)
        if endpoint is None:
            continue
        endpoint["changed"] = True
        endpoint.setdefault("was", (endpoint["failing_since"], endpoint["last_failure_at"]))
        if result.outcome.succeeded:
            endpoint["failing_since"] = None
            continue
        at = result.finished_at
        endpoint["failing_since"] = failure_run(endpoint["failing_since"], endpoint["last_failure_at"], at)
        endpoint["last_failure_at"] = at
        if endpoint["enabled"] and should_disable(endpoint["failing_since"], at):
            endpoint["enabled"] = False
            disable[endpoint["id"]] = (at, f"deliveries failed for more than 3 days "
                                           f"(since {endpoint['failing_since']:%Y-%m-%d %H:%M} UTC)")
    return disable


def _next_step(result, endpoint_enabled):
    """(state, next_attempt_at) of a delivery after this attempt."""
    delivery, outcome = result.delivery, result.outcome
    if outcome.succeeded:
        return "succeeded", None
    if delivery.reason != "test" and not endpoint_enabled:
        return "dropped", None
    due = next_attempt_at(delivery.attempt, result.finished_at, delivery.max_attempts)
    return ("pending", due) if due is not None else ("failed", None)


def record(conn, results):
    """Record a batch of results in the caller's transaction; returns the endpoint ids disabled now."""
    if not results:
        return []
    end_runs = ()
    if any(not r.outcome.succeeded and r.delivery.reason != "test" for r in results):
        endpoints = webhook_deliveries.lock_endpoints(conn, {r.delivery.endpoint_id for r in results})
        disable = _health(endpoints, results)
    else:
        # Only successes: no lock needed, a success just ends any failure run (in the finishing statement).
        end_runs = {r.delivery.endpoint_id for r in results if r.delivery.reason != "test"}
        endpoints = {r.delivery.endpoint_id: {"enabled": True} for r in results}
        disable = {}
    finish, steps = [], {}
    for result in results:
        delivery, outcome = result.delivery, result.outcome
        endpoint = endpoints.get(delivery.endpoint_id)
        state, due = _next_step(result, endpoint is not None and endpoint["enabled"])
        steps[delivery.id] = (state, due)
        # Every attempt row gets what its request really gave, even when the lease was lost meanwhile.
        finish.append((delivery.id, str(delivery.lease_token), delivery.attempt, state, due, outcome.status_code,
                       outcome.error, None if state == "pending" else result.finished_at, delivery.attempt_id,
                       result.attempted_at, outcome.duration_ms, outcome.succeeded, outcome.response_body,
                       outcome.address))
    ours = webhook_deliveries.finish(conn, finish, end_runs)
    for endpoint in endpoints.values():
        if endpoint.get("changed") and (endpoint["failing_since"], endpoint["last_failure_at"]) != endpoint["was"]:
            endpoint_health.update_endpoint_health(conn, endpoint["id"], endpoint["failing_since"],
                                                   endpoint["last_failure_at"])
    for endpoint_id, (at, reason) in disable.items():
        dropped = webhooks.disable_endpoint(conn, endpoint_id, at, reason)
        named = format_id(PREFIXES["webhook_endpoint"], endpoint_id)
        log.error("endpoint disabled endpoint_id=%s dropped=%s reason=%r", named, dropped, reason,
                  extra={"endpoint_id": named})
    for result in results:
        _log(result, steps[result.delivery.id], result.delivery.id in ours)
    return list(disable)


def fields(delivery):
    """The log fields (`extra=`) naming a delivery's attempt: event_id, endpoint_id, attempt."""
    return {"event_id": format_id(PREFIXES["webhook_event"], delivery.event_id),
            "endpoint_id": format_id(PREFIXES["webhook_endpoint"], delivery.endpoint_id),
            "attempt": delivery.attempt}


def _log(result, step, ours):
    if ours and step[0] == "succeeded" and not log.isEnabledFor(logging.DEBUG):
        return  # the common case: nothing to log, and the fields cost more than the rest of recording
    if ours and step[0] == "pending" and result.outcome.error == NOT_SENT:
        return  # said once per endpoint when it was met (worker.Dispatcher), not per attempt
    delivery, outcome = result.delivery, result.outcome
    extra = {**fields(delivery), "reason": delivery.reason, "status_code": outcome.status_code,
             "duration_ms": outcome.duration_ms}
    # The text line says them too (its format shows no extra fields); a JSON line has each as its own field.
    said = " ".join(f"{key}={value}" for key, value in extra.items())
    state, due = step
    if not ours:
        log.warning("lease lost, outcome kept in the attempt log only %s", said, extra=extra)
    elif state == "succeeded":
        log.debug("delivered %s", said, extra=extra)
    elif state == "pending":
        log.info("delivery failed, retrying %s next_attempt_at=%s error=%r", said, due.isoformat(), outcome.error,
                 extra={**extra, "next_attempt_at": due.isoformat(), "error": outcome.error})
    elif state == "dropped":
        log.warning("delivery dropped, endpoint disabled %s error=%r", said, outcome.error,
                    extra={**extra, "error": outcome.error})
    else:
        log.error("delivery abandoned %s error=%r", said, outcome.error, extra={**extra, "error": outcome.error})


def notify_endpoint_admins(conn, settings, clock):
    """E-mail the admins and owners about endpoints failing for 24 hours and endpoints the 3-day rule disabled."""
    now = clock()
    _email(conn, settings, clock, "failing", "endpoint failing for 24 hours",
           lambda: endpoint_health.claim_unwarned(conn, now, WARN_AFTER, FAILURE_RUN_GAP),
           lambda endpoint, recipients: failing_message(
               endpoint, disables_at(endpoint["failing_since"]), recipients, settings.smtp_from),
           endpoint_health.mark_warned)
    _email(conn, settings, clock, "disabled", "endpoint disabled", lambda: endpoint_health.claim_unnotified(conn),
           lambda endpoint, recipients: disabled_message(endpoint, recipients, settings.smtp_from),
           endpoint_health.mark_notified)


def _email(conn, settings, clock, kind, what, claim, message, mark):
    """Send one e-mail per claimed endpoint and mark it; without SMTP, log and leave it for later."""
    if not settings.smtp_host:
        with db.transaction(conn):
            for endpoint in claim():
                named = format_id(PREFIXES["webhook_endpoint"], endpoint["id"])
                log.warning("%s but SHIPTRACK_SMTP_HOST is not set; admins not e-mailed endpoint_id=%s",
                            what, named, extra={"endpoint_id": named})
        return
    with db.transaction(conn):
        for endpoint in claim():
            named = format_id(PREFIXES["webhook_endpoint"], endpoint["id"])
            recipients = webhooks.admin_emails(conn, endpoint["organization_id"])
            if recipients:
                try:
                    send_email(settings.smtp_host, settings.smtp_port, message(endpoint, recipients))
                except OSError as error:  # smtplib errors are OSErrors; try again next pass
                    log.error("%s-endpoint e-mail failed endpoint_id=%s error=%r", kind, named, error,
                              extra={"endpoint_id": named})
                    continue
            mark(conn, endpoint["id"], clock())
            log.info("admins e-mailed (%s) endpoint_id=%s recipients=%s", what, named, len(recipients),
                     extra={"endpoint_id": named})


# The e-mails.

def _named(endpoint):
    """(public id, ` (description)` or "") of an endpoint, as the e-mails name it."""
    description = f" ({endpoint['description']})" if endpoint.get("description") else ""
    return format_id(PREFIXES["webhook_endpoint"], endpoint["id"]), description


def _message(subject, recipients, sender, body):
    """A plain-text e-mail to the admins."""
    message = EmailMessage()
    message["Subject"] = subject
    message["From"] = sender
    message["To"] = ", ".join(recipients)
    message.set_content(body)
    return message


def disabled_message(endpoint, recipients, sender):
    """The notice for an endpoint disabled after failing for more than 3 days."""
    endpoint_id, description = _named(endpoint)
    return _message(f"Webhook endpoint {endpoint_id} was disabled", recipients, sender,
        f"Deliveries to the webhook endpoint {endpoint_id}{description} of "
        f"{endpoint['organization_name']} have failed for more than 3 days, so it was disabled "
        f"at {endpoint['disabled_at']:%Y-%m-%d %H:%M} UTC and its waiting deliveries were dropped.\n\n"
        f"URL: {endpoint['url']}\n"
        f"Reason: {endpoint['disabled_reason']}\n\n"
        f"After fixing the receiver, re-enable it:\n"
        f"  flask --app app webhooks enable {endpoint_id}\n"
        f"(it prints the `webhooks recover` command that sends what it missed)\n"
        f"and see its recent attempts with:\n"
        f"  flask --app app webhooks attempts {endpoint_id}\n")


def failing_message(endpoint, disables_at, recipients, sender):
    """The warning for an endpoint whose deliveries have failed for 24 hours: when the 3-day rule disables it."""
    endpoint_id, description = _named(endpoint)
    return _message(f"Webhook endpoint {endpoint_id} is failing and will be disabled", recipients, sender,
        f"Deliveries to the webhook endpoint {endpoint_id}{description} of "
        f"{endpoint['organization_name']} have failed since {endpoint['failing_since']:%Y-%m-%d %H:%M} UTC.\n"
        f"If they keep failing, it will be disabled at the first failed delivery after "
        f"{disables_at:%Y-%m-%d %H:%M} UTC, and its waiting deliveries will be dropped. "
        f"One successful delivery ends the count.\n\n"
        f"URL: {endpoint['url']}\n\n"
        f"See its recent attempts with:\n"
        f"  flask --app app webhooks attempts {endpoint_id}\n")


def send_email(host, port, message, timeout=30):
    """Send one message through the SMTP server at host:port."""
    with smtplib.SMTP(host, port, timeout=timeout) as smtp:
        smtp.send_message(message)
