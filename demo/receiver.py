"""The demo's webhook receiver: `python -m demo.receiver --port 8001`, HTTPS on 127.0.0.1.

It verifies every delivery's signature with the `standardwebhooks` package (the endpoint's secret comes in
the DEMO_WEBHOOK_SECRET variable), answers 200 within the 10 seconds a delivery may take (400 when the
signature is wrong), and prints one line per event. Its certificate is signed by a CA made for the demo
at its first run and kept in .data/demo/ (demo/certificates.py); the demo's delivery process trusts that
CA through WEBHOOK_CA_BUNDLE and reaches 127.0.0.1 through WEBHOOK_ALLOWED_NETWORKS, given to it alone.
"""
import argparse
import http.server
import json
import os
import socketserver
import ssl
from pathlib import Path

# The receiver's path on its port: the URL of the demo's webhook endpoint.
PATH = "/webhooks"


def certificate(folder):
    """(CA bundle, receiver certificate and key) in `folder`, made once (demo/certificates.py)."""
    from demo import certificates

    return certificates.demo_receiver(folder)


def describe(payload, message_id):
    """The line printed for a verified event: type, shipment, webhook-id."""
    data = payload.get("data") or {}
    subject = data.get("object") or {}
    shipment = subject.get("shipment_id") or (subject.get("id") if subject.get("object") == "shipment" else None)
    changed = ", ".join(f"{name} was {value}" for name, value in (data.get("previous_attributes") or {}).items())
    return (f"receiver: {payload.get('type')} {shipment or subject.get('endpoint_id') or '-'} {message_id} "
            f"signature verified" + (f" ({changed})" if changed else ""))


class Handler(http.server.BaseHTTPRequestHandler):
    """Verifies and prints each POST; anything else is 404."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        """One delivery: verify the signature over the raw body, print, answer."""
        from standardwebhooks.webhooks import WebhookVerificationError

        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        message_id = self.headers.get("webhook-id", "-")
        if self.path != PATH:
            return self._answer(404, {"error": "not found"})
        try:
            payload = self.server.verifier.verify(body, dict(self.headers.items()))
        except (WebhookVerificationError, ValueError) as error:
            print(f"receiver: {message_id} signature NOT verified ({error}), answered 400", flush=True)
            return self._answer(400, {"error": "bad signature"})
        print(describe(payload, message_id), flush=True)
        return self._answer(200, {"received": True})

    def _answer(self, status, document):
        payload = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class Receiver(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """A threaded HTTPS server on 127.0.0.1 verifying with one endpoint's secret."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port, cert_path, secret):
        from standardwebhooks.webhooks import Webhook

        super().__init__(("127.0.0.1", port), Handler)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert_path)
        self.socket = context.wrap_socket(self.socket, server_side=True)
        self.verifier = Webhook(secret)


def main(argv=None):
    """Serve until terminated."""
    parser = argparse.ArgumentParser(prog="python -m demo.receiver", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--certificate", default=str(Path(".data") / "demo" / "receiver.pem"),
                        help="PEM file with the certificate chain and its key")
    args = parser.parse_args(argv)
    server = Receiver(args.port, args.certificate, os.environ["DEMO_WEBHOOK_SECRET"])
    print(f"receiver: listening on https://127.0.0.1:{args.port}{PATH}", flush=True)
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
