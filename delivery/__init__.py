"""Outbound webhooks: render the outbox, fan out, send signed requests, retry, disable, recover."""
