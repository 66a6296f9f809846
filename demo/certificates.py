"""The demo's certificate authority, kept in .data/demo/, and the certificates it issues for 127.0.0.1.

The demo's delivery process trusts this CA (WEBHOOK_CA_BUNDLE), so a receiver on this machine serving a
certificate it issued is reached over HTTPS like any receiver: the demo's own (receiver.pem) and one of
yours (`flask --app app demo certificate`, docs/receiving-webhooks.md "Testing locally"). The CA's key is
kept beside it, readable by its owner only, so certificates can be issued after the demo started.
"""
from pathlib import Path

CA_FILE, CA_KEY_FILE = "ca.pem", "ca-key.pem"
# The names every certificate is issued for: a receiver on this machine, by address or by name.
NAMES = ("127.0.0.1", "localhost")


def _private(path, data):
    """Write `data` to a file only its owner can read."""
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_bytes(data)


def authority(folder):
    """(trustme.CA, made now?): the CA kept in `folder`, made when it or its key is missing."""
    import trustme

    folder = Path(folder)
    ca_path, key_path = folder / CA_FILE, folder / CA_KEY_FILE
    if ca_path.exists() and key_path.exists():
        return trustme.CA.from_pem(ca_path.read_bytes(), key_path.read_bytes()), False
    folder.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="shiptrack demo")
    _private(key_path, ca.private_key_pem.bytes())
    ca_path.write_bytes(ca.cert_pem.bytes())
    return ca, True


def issue(ca, cert_path, key_path=None):
    """A certificate for NAMES signed by `ca`: the chain in `cert_path`, the key there too or in `key_path`."""
    issued = ca.issue_cert(*NAMES)
    chain = b"".join(blob.bytes() for blob in issued.cert_chain_pems)
    if key_path is None:
        _private(Path(cert_path), chain + issued.private_key_pem.bytes())
    else:
        Path(cert_path).write_bytes(chain)
        _private(Path(key_path), issued.private_key_pem.bytes())


def demo_receiver(folder):
    """(CA bundle, the demo receiver's certificate and key): made once; again with a new CA."""
    folder = Path(folder)
    ca, made = authority(folder)
    cert_path = folder / "receiver.pem"
    if made or not cert_path.exists():
        issue(ca, cert_path)
    return folder / CA_FILE, cert_path
