"""E-mail to an organization's admins and owners when an endpoint keeps failing, and when it is disabled."""
import smtplib
from email.message import EmailMessage

from api.ids import PREFIXES, format_id


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


def send(host, port, message, timeout=30):
    """Send one message through the SMTP server at host:port."""
    with smtplib.SMTP(host, port, timeout=timeout) as smtp:
        smtp.send_message(message)
