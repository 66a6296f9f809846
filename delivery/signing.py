"""Standard Webhooks signatures: HMAC-SHA256 over `id.timestamp.body` with the decoded secret."""
import base64
import hashlib
import hmac
import secrets

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32


def new_secret():
    """A fresh endpoint secret, `whsec_` + base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def secret_key(secret):
    """The HMAC key of a `whsec_` secret; ValueError when the secret is not `whsec_` and base64."""
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError("the secret does not start with whsec_")
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)


def sign(secret, message_id, timestamp, body):
    """The `webhook-signature` header value for exactly these body bytes."""
    signed = f"{message_id}.{int(timestamp)}.".encode() + body
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def headers(secret, message_id, timestamp, body):
    """Every header of a webhook request except Host and Content-Length."""
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(timestamp)),
        "webhook-signature": sign(secret, message_id, timestamp, body),
        "Content-Type": "application/json",
        "User-Agent": "Service-Webhooks/1.0",
    }
