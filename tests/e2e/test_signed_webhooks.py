"""Signed webhook deliveries end to end: `sluice local` pushes a queue to a webhook on this machine, and the
receiver checks each POST with the SDK's `verify_webhook` against the keys the API publishes; a forged
delivery, a replayed one and a tampered body are refused (sluice/webhooks.py, docs/api.md)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sluice.client import SluiceClient
from sluice.leases import KeyringSource, LeaseKeyring
from sluice.webhooks import HEADER_ID, HEADER_SIGNATURE, WebhookSigner, WebhookVerificationError

pytestmark = pytest.mark.e2e


class _Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with self.server.lock:  # type: ignore[attr-defined]
            self.server.deliveries.append((dict(self.headers.items()), body))  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def delivery(local_server) -> tuple[dict[str, str], bytes]:
    """One push delivery of a 2-message queue, as the receiver got it: (headers, raw body)."""
    hook = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    hook.lock, hook.deliveries = threading.Lock(), []  # type: ignore[attr-defined]
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    try:
        admin = local_server.client()
        name = f"signed-{uuid.uuid4().hex[:8]}"
        admin.create_queue(name)
        admin.send_batch(name, [{"body": {"n": 1}}, {"body": {"n": 2}}])
        admin.create_consumer(
            name, type="webhook", url=f"http://127.0.0.1:{hook.server_address[1]}/hook", max_batch_size=10
        )
        deadline = time.monotonic() + 90  # the local coordinator starts push workers on its next pass
        while time.monotonic() < deadline and not hook.deliveries:  # type: ignore[attr-defined]
            time.sleep(0.25)
        assert hook.deliveries, "no webhook delivery within 90 s"  # type: ignore[attr-defined]
        return hook.deliveries[0]  # type: ignore[attr-defined]
    finally:
        hook.shutdown()


def test_the_public_keys_need_no_token(local_server) -> None:
    keys = SluiceClient(local_server.url, None).webhook_keys()
    assert [(k["kty"], k["crv"]) for k in keys["keys"]] == [("OKP", "Ed25519")]


def test_a_delivery_verifies_with_the_published_keys(local_server, delivery) -> None:
    headers, body = delivery
    SluiceClient(local_server.url, None).verify_webhook(headers, body)
    assert sorted(m["body"]["n"] for m in json.loads(body)["messages"]) == [1, 2]


def test_a_forged_delivery_is_refused(local_server, delivery) -> None:
    _, body = delivery
    impostor = WebhookSigner(
        KeyringSource(lambda _f: LeaseKeyring(1, "not-this-deployment-" + "k" * 40).to_json()),
        lambda: int(time.time() * 1000),
    )
    with pytest.raises(WebhookVerificationError, match="forged"):
        SluiceClient(local_server.url, None).verify_webhook(impostor.headers(body), body)
    with pytest.raises(WebhookVerificationError, match="missing header"):
        SluiceClient(local_server.url, None).verify_webhook({"content-type": "application/json"}, body)


def test_a_replayed_delivery_is_refused(local_server, delivery) -> None:
    headers, body = delivery
    receiver = SluiceClient(local_server.url, None)
    receiver.verify_webhook(headers, body)
    with pytest.raises(WebhookVerificationError, match="already accepted"):
        receiver.verify_webhook(headers, body)


def test_a_tampered_body_is_refused(local_server, delivery) -> None:
    headers, body = delivery
    doc = json.loads(body)
    doc["messages"][0]["body"] = {"n": 1000}
    with pytest.raises(WebhookVerificationError, match="altered"):
        SluiceClient(local_server.url, None).verify_webhook(headers, json.dumps(doc).encode())
    assert headers[HEADER_ID] and headers[HEADER_SIGNATURE].startswith("v1a,")
