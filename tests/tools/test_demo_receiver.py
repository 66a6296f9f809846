"""demo/receiver.py: verifies what the service signs, prints one line per event, refuses a bad signature;
demo/certificates.py: the demo's CA keeps its key and issues certificates a client trusting it accepts."""
import json
import socket
import ssl
import threading
import time

import pytest
import requests

from delivery import signing
from demo import certificates, receiver


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The demo's CA and the receiver's certificate, made in a folder of their own."""
    folder = tmp_path_factory.mktemp("demo-ca")
    made = receiver.certificate(folder)
    assert receiver.certificate(folder) == made  # kept: a second call makes nothing new
    return made


@pytest.fixture
def running(files):
    """The receiver on a free port with a new secret: (base URL, secret, CA bundle)."""
    secret = signing.new_secret()
    server = receiver.Receiver(0, files[1], secret)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_address[1]}", secret, str(files[0])
    server.shutdown()
    server.server_close()


def post(base, ca_bundle, body, headers, path=receiver.PATH):
    return requests.post(base + path, data=body, headers={"Content-Type": "application/json", **headers},
                         verify=ca_bundle, timeout=10)


def test_a_signed_delivery_is_verified_and_printed(running, capsys):
    base, secret, ca_bundle = running
    body = json.dumps({"id": "msg_12", "type": "shipment.status_changed", "data": {
        "object": {"object": "shipment", "id": "shp_7"}, "previous_attributes": {"status": "validated"}}}).encode()
    response = post(base, ca_bundle, body, signing.headers(secret, "msg_12", int(time.time()), body))
    assert (response.status_code, response.json()) == (200, {"received": True})
    assert capsys.readouterr().out == ("receiver: shipment.status_changed shp_7 msg_12 signature verified "
                                       "(status was validated)\n")


def test_an_alert_names_its_shipment(running, capsys):
    base, secret, ca_bundle = running
    body = json.dumps({"id": "msg_13", "type": "alert.created", "data": {
        "object": {"object": "monitoring_alert", "id": "alr_4", "shipment_id": "shp_9"},
        "previous_attributes": None}}).encode()
    assert post(base, ca_bundle, body, signing.headers(secret, "msg_13", int(time.time()), body)).status_code == 200
    assert capsys.readouterr().out == "receiver: alert.created shp_9 msg_13 signature verified\n"


@pytest.mark.parametrize("tamper", ["body", "secret", "stale"])
def test_a_bad_signature_is_refused(running, capsys, tamper):
    base, secret, ca_bundle = running
    body = b'{"id":"msg_14","type":"shipment.eta_changed","data":{"object":{"object":"shipment","id":"shp_1"}}}'
    signed_with = signing.new_secret() if tamper == "secret" else secret
    at = int(time.time()) - (3600 if tamper == "stale" else 0)
    headers = signing.headers(signed_with, "msg_14", at, body)
    sent = body.replace(b"shp_1", b"shp_2") if tamper == "body" else body
    response = post(base, ca_bundle, sent, headers)
    assert (response.status_code, response.json()) == (400, {"error": "bad signature"})
    output = capsys.readouterr().out
    assert output.startswith("receiver: msg_14 signature NOT verified (") and output.endswith("), answered 400\n")


def test_another_path_is_not_found(running):
    base, _secret, ca_bundle = running
    assert post(base, ca_bundle, b"{}", {}, path="/elsewhere").status_code == 404


def handshake(ca_bundle, cert_path, key_path):
    """The name a client trusting only `ca_bundle` verified in a TLS handshake with a server using the certificate."""
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert_path, key_path)
    client_context = ssl.create_default_context(cafile=str(ca_bundle))
    left, right = socket.socketpair()
    with left, right:
        server = threading.Thread(target=lambda: server_context.wrap_socket(right, server_side=True).close())
        server.start()
        with client_context.wrap_socket(left, server_hostname="127.0.0.1") as tls:
            name = tls.getpeercert()["subjectAltName"]
        server.join(10)
    return name


def test_the_ca_keeps_its_key_and_issues_certificates_the_demo_trusts(tmp_path):
    ca_bundle, receiver_pem = receiver.certificate(tmp_path)
    assert (tmp_path / "ca-key.pem").stat().st_mode & 0o777 == 0o600
    ca, made = certificates.authority(tmp_path)
    assert not made
    certificates.issue(ca, tmp_path / "localhost.pem", tmp_path / "localhost-key.pem")
    assert (tmp_path / "localhost-key.pem").stat().st_mode & 0o777 == 0o600
    assert handshake(ca_bundle, tmp_path / "localhost.pem", tmp_path / "localhost-key.pem") \
        == (("IP Address", "127.0.0.1"), ("DNS", "localhost"))
    # A CA kept without its key (an older demo) is made again, and the receiver's certificate with it.
    (tmp_path / "ca-key.pem").unlink()
    old = receiver_pem.read_bytes()
    assert receiver.certificate(tmp_path) == (ca_bundle, receiver_pem)
    assert receiver_pem.read_bytes() != old and (tmp_path / "ca-key.pem").exists()
    assert handshake(ca_bundle, receiver_pem, receiver_pem) == (("IP Address", "127.0.0.1"), ("DNS", "localhost"))
