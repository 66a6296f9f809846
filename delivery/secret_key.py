"""Webhook endpoint secrets encrypted at rest under the deployment's secret key (docs/secret-key.md).

A stored secret is either `fernet:` + a Fernet token (AES-128-CBC with HMAC-SHA256, from the
`cryptography` package) of the `whsec_` secret, or the `whsec_` secret itself, as a deployment
upgraded from before encryption keeps it until `flask --app app secrets encrypt`. The current key
seals; it and the keys of SECRET_KEY_OLD open (MultiFernet), so rotating never stops delivery.
"""
import dataclasses
import logging
import os
import uuid
from urllib.parse import parse_qs, urlsplit

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from models import db, endpoint_secrets
from models.db import EMBEDDED_DATA_DIR, EMBEDDED_DATABASE
from models.embedded import EMBEDDED_DATABASE_VARIABLE
from rendering.ids import PREFIXES, format_id

ENCRYPTED_PREFIX = "fernet:"
# The embedded database's key lives beside its data, so a checkout encrypts with no step of its own.
EMBEDDED_KEY_FILE = EMBEDDED_DATA_DIR.parent / "secret_key"
DOCS = "docs/secret-key.md"
NEW_KEY_COMMAND = "flask --app app secrets new-key"

MISSING = (f"webhook endpoint secrets are encrypted and no secret key is set: set SHIPTRACK_SECRET_KEY or "
           f"SHIPTRACK_SECRET_KEY_FILE to the key that encrypted them ({DOCS})")
WRONG = (f"the secret key does not open the stored webhook endpoint secrets: SHIPTRACK_SECRET_KEY is not the key "
         f"that encrypted them (while rotating, set the previous one in SHIPTRACK_SECRET_KEY_OLD) ({DOCS})")
NO_KEY = (f"no secret key is set, so webhook endpoint secrets are stored as plain text: make one with "
          f"`{NEW_KEY_COMMAND}`, set it as SHIPTRACK_SECRET_KEY, then run `flask --app app secrets encrypt` ({DOCS})")
# Some stored secrets open and these do not (one endpoint's secret rolled under a key this process lacks).
UNOPENED = ("the secret key does not open the stored secrets of webhook endpoints {ids}: their deliveries fail and "
            "are retried until a key that opens them is set (while rotating, set the previous one in "
            f"SHIPTRACK_SECRET_KEY_OLD) ({DOCS})")
UNOPENED_NAMED = 10  # endpoints named in that line; the rest are counted
# The error of a delivery's attempt when its endpoint's secret will not open: nothing was sent.
NOT_SENT = f"not sent: the secret key does not open this endpoint's secret ({DOCS})"
# ... when the secret opens (or is stored plain) but is not `whsec_` and base64, so nothing can be signed with it.
# Unlike NOT_SENT, no key would open it: it is the endpoint's own failure, which counts toward disabling it
# and e-mailing its admins, who can roll the secret.
UNUSABLE = (f"not sent: this endpoint's secret is not whsec_ and base64, so nothing can be signed with it: roll it "
            f"with `flask --app app webhooks roll-secret` ({DOCS})")

# Opened secrets kept per stored value: the delivery loop opens the same endpoints' tokens at every claim, in
# its one thread, and a decryption costs far more than the rest of handing a delivery to a worker.
OPENED_CACHE_SIZE = 10_000

log = logging.getLogger("shiptrack.secrets")


class SecretKeyError(Exception):
    """Stored secrets cannot be opened or sealed with the configured keys (the message says why, in one line)."""


class SecretKeys:
    """The keys of the deployment: the first seals, every one opens. Without any, secrets stay plain text."""

    def __init__(self, keys=(), problem=None):
        self.problem = problem
        self._fernet = MultiFernet([Fernet(key) for key in keys]) if keys and problem is None else None
        self._opened = {}

    @property
    def configured(self):
        """Whether a key is set (a key that is not one counts: every use then says what is wrong)."""
        return self._fernet is not None or self.problem is not None

    def _require(self, missing):
        if self.problem is not None:
            raise SecretKeyError(self.problem)
        if self._fernet is None:
            raise SecretKeyError(missing)
        return self._fernet

    def seal(self, secret):
        """The value to store for `secret`: encrypted under the current key, or plain without a key."""
        if not self.configured:
            return secret
        return ENCRYPTED_PREFIX + self._require(NO_KEY).encrypt(secret.encode()).decode()

    def open(self, stored):
        """The `whsec_` secret a stored value holds; SecretKeyError when no key set opens it."""
        if not is_encrypted(stored):
            return stored
        if stored in self._opened:
            return self._opened[stored]
        try:
            secret = self._require(MISSING).decrypt(stored.removeprefix(ENCRYPTED_PREFIX).encode()).decode()
        except InvalidToken:
            raise SecretKeyError(WRONG) from None
        if len(self._opened) >= OPENED_CACHE_SIZE:
            self._opened.clear()
        self._opened[stored] = secret
        return secret

    def reseal(self, stored):
        """A stored value opened and sealed again under the current key (encrypting and rotating)."""
        return ENCRYPTED_PREFIX + self._require(NO_KEY).encrypt(self.open(stored).encode()).decode()

    def opened(self, delivery):
        """A ClaimedDelivery carrying its endpoint's secret ready to sign with."""
        return dataclasses.replace(delivery, secret=self.open(delivery.secret))


def is_encrypted(stored):
    """Whether a stored secret is encrypted (else it is the `whsec_` secret itself)."""
    return stored.startswith(ENCRYPTED_PREFIX)


def new_key():
    """A new secret key: 32 random bytes, url-safe base64, as Fernet takes them."""
    return Fernet.generate_key().decode()


def from_config(config, embedded_key_file=EMBEDDED_KEY_FILE):
    """The keys the settings name: SECRET_KEY, else SECRET_KEY_FILE, else the embedded database's own key file.

    Never raises: a key that is not one is kept as the SecretKeys' problem, said by every use.
    """
    current, source = config["SECRET_KEY"], "SHIPTRACK_SECRET_KEY"
    if not current and config["SECRET_KEY_FILE"]:
        source = f"the key file {config['SECRET_KEY_FILE']}"
        try:
            current = _read_key(config["SECRET_KEY_FILE"])
        except OSError as error:
            return SecretKeys(problem=f"cannot read {source}: {error.strerror or error} ({DOCS})")
    elif not current and is_embedded(config["DATABASE_URL"]):
        source = f"the key file {embedded_key_file}"
        current = embedded_key(embedded_key_file)
    old = config["SECRET_KEY_OLD"] or []
    old = [key.strip() for key in (old.split(",") if isinstance(old, str) else old) if key.strip()]
    if not current:
        return SecretKeys(problem="SHIPTRACK_SECRET_KEY_OLD is set without SHIPTRACK_SECRET_KEY" if old else None)
    for key, name in [(current, source)] + [(key, "SHIPTRACK_SECRET_KEY_OLD") for key in old]:
        try:
            Fernet(key)
        except (ValueError, TypeError):
            return SecretKeys(problem=f"{name} holds no secret key (32 url-safe base64-encoded bytes, as "
                                      f"`{NEW_KEY_COMMAND}` prints)")
    return SecretKeys([current, *old])


def _read_key(path):
    with open(path) as file:
        return file.read().strip()


def is_embedded(url, data_dir=EMBEDDED_DATA_DIR, database=None):
    """Whether `url` is the embedded default: unset, or the embedded server's own database (`shiptrack`, or
    the scratch database $EMBEDDED_DATABASE names: docs/first-shipment.md).

    Processes started by one that started the server (dev.py's gunicorn and delivery script) get its
    URL in DATABASE_URL: its socket directory is the one postmaster.pid records (line 5).
    """
    if not url:
        return True
    parts = urlsplit(url)
    if parts.path.lstrip("/") != (database or os.environ.get(EMBEDDED_DATABASE_VARIABLE) or EMBEDDED_DATABASE):
        return False
    try:
        lines = (data_dir / "postmaster.pid").read_text().splitlines()
    except OSError:
        return False
    return len(lines) > 4 and parse_qs(parts.query).get("host") == [lines[4]]


def embedded_key(path=EMBEDDED_KEY_FILE):
    """The key in `path`, made first (mode 0600) if there is none; safe in several processes at once."""
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written whole under a name of its own, then linked: a process never reads a half-written key, and
    # of several made at once the first link wins and every process reads that one.
    draft = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    with open(os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as file:
        file.write(new_key() + "\n")
        file.flush()
        os.fsync(file.fileno())
    try:
        os.link(draft, path)
    except FileExistsError:
        pass
    finally:
        os.unlink(draft)
    return _read_key(path)


def survey(conn, keys):
    """Open every stored secret: the (level, line) to give about them, or None.

    Raises SecretKeyError when the keys are unusable or open none of the encrypted secrets; secrets some
    of which open are an ERROR line naming the endpoints of the others (they fail alone).
    """
    if keys.problem is not None:
        raise SecretKeyError(keys.problem)
    stored = endpoint_secrets.survey(conn)
    unopened = []
    for endpoint_id, secret in zip(stored["ids"], stored["secrets"]):
        try:
            keys.open(secret)
        except SecretKeyError:
            if not keys.configured:
                raise  # MISSING
            unopened.append(endpoint_id)
    if unopened and len(unopened) == len(stored["ids"]):
        raise SecretKeyError(WRONG)
    if unopened:
        named = ", ".join(format_id(PREFIXES["webhook_endpoint"], id_) for id_ in unopened[:UNOPENED_NAMED])
        more = len(unopened) - UNOPENED_NAMED
        return logging.ERROR, UNOPENED.format(ids=named + (f" and {more} more" if more > 0 else ""))
    if not keys.configured:
        return logging.WARNING, NO_KEY
    if stored["plain"]:
        return logging.WARNING, (f"{stored['plain']} webhook endpoint secrets are stored as plain text: "
                                 f"run `flask --app app secrets encrypt` ({DOCS})")
    return None


def check(conn, keys):
    """Raise SecretKeyError unless `keys` open the stored secrets (some will do); else the line to give, or None."""
    notice = survey(conn, keys)
    return notice and notice[1]


def check_at_start(conn, keys):
    """Raise SecretKeyError unless `keys` open the stored secrets, and log the line to give, if any.

    A database error says nothing about the key: it is left to what meets it next (the delivery loop).
    """
    try:
        notice = survey(conn, keys)
    except (db.DatabaseUnavailable, db.Error):
        return
    if notice:
        level, line = notice
        log.log(level, "%s", line)


def report_for_service(database=None):
    """The API's line at start (ERROR or WARNING), once, from gunicorn's master: the settings `create_app()`
    reads, on a connection of its own (`database`, what models.db.connect takes, defaults to DATABASE_URL).

    A database that cannot be reached, or has no schema yet, is reported by the requests that need it.
    Returns the error, or None.
    """
    from config import load_config
    from logs import configure_logging

    config = load_config()
    config["DATABASE_URL"] = db.resolve_database_url(config["DATABASE_URL"])
    configure_logging(config["LOG_FORMAT"])
    keys = from_config(config)
    try:
        if keys.problem is not None:
            raise SecretKeyError(keys.problem)
        conn = db.connect(database or db.Target.from_config(config, "api"))
    except SecretKeyError as error:
        log.error("%s", error)
        return str(error)
    except (db.DatabaseUnavailable, db.Error):
        return None
    try:
        check_at_start(conn, keys)
    except SecretKeyError as error:
        log.error("%s", error)
        return str(error)
    finally:
        conn.close()
    return None
