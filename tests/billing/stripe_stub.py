"""A local stand-in for Stripe's API and hosted pages, for tests of running servers
(STRIPE_API_BASE points the stripe library at it): it makes Checkout and billing portal
sessions the way Stripe answers them, remembers what it was asked, and serves a one-button
"hosted checkout" page whose Pay link returns to the session's success_url. Nothing here
reaches Stripe."""

from __future__ import annotations

import html
import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl


class StripeStub:
    def __init__(self):
        self.sessions: dict[str, dict] = {}  # session id -> the form fields it was created with
        self.base = ""

    def handler(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                fields = dict(parse_qsl(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()))
                number = len(stub.sessions) + 1
                if self.path == "/v1/checkout/sessions":
                    session_id = f"cs_test_stub{number}"
                    url = f"{stub.base}/c/pay/{session_id}"
                    body = {"id": session_id, "object": "checkout.session", "mode": fields.get("mode"), "url": url}
                elif self.path == "/v1/billing_portal/sessions":
                    session_id = f"bps_test_stub{number}"
                    body = {"id": session_id, "object": "billing_portal.session", "url": fields["return_url"]}
                else:
                    self._send(404, b'{"error": {"type": "invalid_request_error"}}', "application/json")
                    return
                stub.sessions[session_id] = fields
                self._send(200, json.dumps(body).encode(), "application/json")

            def do_GET(self):
                session = stub.sessions.get(self.path.rsplit("/", 1)[-1])
                if not self.path.startswith("/c/pay/") or session is None:
                    self._send(204, b"", "text/plain")  # the browser's favicon and the like
                    return
                page = (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>Checkout</title>"
                        f"<meta name=viewport content='width=device-width, initial-scale=1'></head><body>"
                        f"<h1>Stripe test checkout</h1><p>{html.escape(session.get('line_items[0][price]', ''))}</p>"
                        f"<a id=pay href='{html.escape(session['success_url'])}'>Pay</a></body></html>")
                self._send(200, page.encode(), "text/html; charset=utf-8")

        return Handler


@contextmanager
def stripe_stub():
    stub = StripeStub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), stub.handler())
    stub.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
