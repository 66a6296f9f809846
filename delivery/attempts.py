"""One attempt of a claimed delivery: send it now and keep what happened for recording.

Shared by the delivery loop (delivery/worker.py) and the CLI's `webhooks test` / `resend`, which
send the deliveries they create at once.
"""
import time
from dataclasses import dataclass
from datetime import datetime, timezone

from api.ids import PREFIXES, format_id
from delivery.sender import Outcome
from models.webhook_deliveries import ClaimedDelivery


def utcnow():
    """The real clock (tests pass their own)."""
    return datetime.now(timezone.utc)


@dataclass
class Result:
    """One finished attempt of a claimed delivery."""

    delivery: ClaimedDelivery
    attempted_at: datetime
    finished_at: datetime
    outcome: Outcome


def send_delivery(sender, delivery, clock=utcnow):
    """Send one ClaimedDelivery; returns its Result (webhook-timestamp is the real time of signing)."""
    attempted_at = clock()
    outcome = sender.send(delivery.url, delivery.secret, format_id(PREFIXES["webhook_event"], delivery.event_id),
                          delivery.body.encode(), time.time())
    return Result(delivery, attempted_at, clock(), outcome)
