"""Fixtures of the delivery tests: delivery settings for the local receiver, an SMTP server for the admins' e-mails."""
import socket

import pytest

from tests.support.webhooks import delivery_settings


@pytest.fixture
def settings(database_url, ca_bundle):
    """Delivery settings for the test database and the local receiver."""
    return delivery_settings(DATABASE_URL=database_url, WEBHOOK_ALLOWED_NETWORKS=["127.0.0.1/32"],
                             WEBHOOK_CA_BUNDLE=ca_bundle, SERVICE_DOMAIN="shiptrack.example", WEBHOOK_WORKERS=16,
                             WEBHOOK_PER_ENDPOINT=4)


@pytest.fixture
def smtp_server():
    """A real SMTP server on 127.0.0.1 keeping every message it receives."""
    from aiosmtpd.controller import Controller

    class Inbox:
        def __init__(self):
            self.messages = []

        async def handle_DATA(self, server, session, envelope):
            self.messages.append({"from": envelope.mail_from, "to": list(envelope.rcpt_tos),
                                  "content": envelope.content.decode()})
            return "250 OK"

    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    yield {"port": port, "messages": inbox.messages}
    controller.stop()
