"""The extra CA of WEBHOOK_CA_BUNDLE adds to the public roots (certifi's bundle), never replaces them.

No public CA signs certificates for a test, so one test stands a CA of its own in for a public one:
certifi's bundle is copied with that CA's certificate added, and `certifi.where()` names the copy,
which the sender loads exactly as it loads the real bundle. The other test checks the real bundle:
every one of its roots is in the sender's SSL context, beside the extra CA.
"""
import ssl
from pathlib import Path

import certifi
import pytest
import trustme

from delivery import signing
from delivery.sender import send_delivery
from tests.support.webhooks import RECEIVER_HOST, RawReceiver, claimed_delivery, delivery_settings, resolver

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


@pytest.fixture
def receiver_of():
    """Makes a RawReceiver (answering 200) whose certificate for receiver.test comes from the CA given."""
    made = []

    def make(ca):
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert(RECEIVER_HOST).configure_cert(context)
        made.append(RawReceiver(context, [OK]))
        return made[-1]

    yield make
    for receiver in made:
        receiver.close()


def _outcomes(ca_bundle, receivers):
    sender = delivery_settings(WEBHOOK_ALLOWED_NETWORKS=["127.0.0.1/32"], WEBHOOK_CA_BUNDLE=ca_bundle).make_sender(
        resolver)
    try:
        return [send_delivery(sender, claimed_delivery(receiver.url(), signing.new_secret())).outcome
                for receiver in receivers]
    finally:
        sender.close()


def test_receivers_of_a_public_ca_and_of_the_extra_ca_are_both_reached(ca, ca_bundle, receiver_of, tmp_path,
                                                                        monkeypatch):
    public, unknown = trustme.CA(), trustme.CA()
    roots = tmp_path / "public-roots.pem"
    roots.write_bytes(Path(certifi.where()).read_bytes() + public.cert_pem.bytes())
    monkeypatch.setattr(certifi, "where", lambda: str(roots))
    receivers = [receiver_of(public), receiver_of(ca), receiver_of(unknown)]
    with_extra, without_extra = _outcomes(ca_bundle, receivers), _outcomes(None, receivers)
    assert [(o.succeeded, o.status_code, o.error) for o in with_extra[:2]] == [(True, 200, None)] * 2
    assert [(o.succeeded, o.status_code, o.error) for o in without_extra[:1]] == [(True, 200, None)]
    for refused in (with_extra[2], *without_extra[1:]):  # a CA in neither, and the extra CA when not set
        assert (refused.succeeded, refused.status_code) == (False, None)
        assert refused.error.startswith("TLS error: [SSL: CERTIFICATE_VERIFY_FAILED]"), refused.error
    assert [len(receiver.requests) for receiver in receivers] == [2, 1, 0]


def test_every_root_of_certifi_is_trusted_beside_the_extra_ca(ca, ca_bundle):
    sender = delivery_settings(WEBHOOK_CA_BUNDLE=ca_bundle).make_sender()
    try:
        trusted = set(sender.adapter.ssl_context.get_ca_certs(binary_form=True))
    finally:
        sender.close()
    public = ssl.create_default_context(cafile=certifi.where()).get_ca_certs(binary_form=True)
    extra = ssl.PEM_cert_to_DER_cert(ca.cert_pem.bytes().decode())
    assert len(public) > 100
    assert trusted == {*public, extra}
