"""The signer: a fixed vector from the Standard Webhooks specification, and the standardwebhooks package."""
import base64
from datetime import datetime, timezone

import pytest
import standardwebhooks

from delivery import signing

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MESSAGE_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
TIMESTAMP = 1614265330
BODY = b'{"test": 2432232314}'


def test_fixed_vector():
    assert signing.sign(SECRET, MESSAGE_ID, TIMESTAMP, BODY) == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_same_as_the_standardwebhooks_package():
    secret = signing.new_secret()
    when = datetime(2026, 11, 2, 8, 15, tzinfo=timezone.utc)
    expected = standardwebhooks.Webhook(secret).sign("msg_42", when, BODY.decode())
    assert signing.sign(secret, "msg_42", when.timestamp(), BODY) == expected


def test_new_secret_shape():
    secret = signing.new_secret()
    assert secret.startswith("whsec_") and len(base64.b64decode(secret[6:])) == 32
    assert signing.new_secret() != secret


def test_headers_are_exactly_the_specs():
    headers = signing.headers(SECRET, MESSAGE_ID, TIMESTAMP, BODY)
    assert headers == {"webhook-id": MESSAGE_ID, "webhook-timestamp": "1614265330",
                       "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
                       "Content-Type": "application/json", "User-Agent": "Service-Webhooks/1.0"}


@pytest.mark.parametrize("secret", ["whsec_A", "whsec_AAA", "whsec_AA=A", "whsec_ab!c", "whsec_AAAA ", "MfKQ9r8G",
                                    "fernet:gAAAAABk"])
def test_a_secret_that_is_not_whsec_and_base64_signs_nothing(secret):
    with pytest.raises(ValueError):
        signing.sign(secret, MESSAGE_ID, TIMESTAMP, BODY)
