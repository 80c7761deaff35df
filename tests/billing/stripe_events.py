"""Stripe webhook events as Stripe sends them, signed here with the webhook secret exactly
as Stripe signs them: `Stripe-Signature: t=<unix time>,v1=<hex HMAC-SHA256 of "t.payload">`.
No test ever reaches Stripe's servers."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time

WEBHOOK_SECRET = "whsec_test_0123456789abcdefghijklmnopqrstuv"
WEBHOOK_PATH = "/api/billing/stripe/webhook"
_ids = itertools.count(1)


def signature_header(payload: str, secret: str = WEBHOOK_SECRET, timestamp: int | None = None) -> str:
    timestamp = int(time.time()) if timestamp is None else timestamp
    digest = hmac.new(secret.encode(), f"{timestamp}.{payload}".encode(), hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def signed(event: dict, secret: str = WEBHOOK_SECRET, timestamp: int | None = None) -> tuple[str, dict]:
    """(body, headers) of the webhook request Stripe would make for the event."""
    payload = json.dumps(event, separators=(",", ":"))
    return payload, {"Content-Type": "application/json; charset=utf-8",
                     "Stripe-Signature": signature_header(payload, secret, timestamp)}


def event(kind: str, obj: dict, *, created: int | None = None, event_id: str | None = None) -> dict:
    return {"id": event_id or f"evt_test_{next(_ids):06d}_{int(time.time() * 1000)}", "object": "event",
            "api_version": "2025-06-30.basil", "created": int(time.time()) if created is None else created,
            "livemode": False, "pending_webhooks": 1, "type": kind, "data": {"object": obj}}


def checkout_completed(*, account_id: int, plan: str, customer: str = "cus_test_1", subscription: str = "sub_test_1",
                       payment_status: str = "paid", **kwargs) -> dict:
    return event("checkout.session.completed", {
        "id": f"cs_test_{account_id}", "object": "checkout.session", "mode": "subscription",
        "client_reference_id": str(account_id), "customer": customer, "subscription": subscription,
        "payment_status": payment_status, "status": "complete",
        "metadata": {"account_id": str(account_id), "plan": plan}}, **kwargs)


def invoice(kind: str, *, customer: str = "cus_test_1", subscription: str = "sub_test_1", price: str = "",
            **kwargs) -> dict:
    """invoice.paid / invoice.payment_succeeded / invoice.payment_failed, in the current
    API shape (the subscription under parent.subscription_details)."""
    lines = [{"object": "line_item", "pricing": {"price_details": {"price": price}}}] if price else []
    return event(kind, {
        "id": "in_test_1", "object": "invoice", "customer": customer, "billing_reason": "subscription_cycle",
        "status": "paid" if kind != "invoice.payment_failed" else "open",
        "parent": {"type": "subscription_details", "subscription_details": {"subscription": subscription}},
        "lines": {"object": "list", "data": lines}}, **kwargs)


def subscription(kind: str, *, customer: str = "cus_test_1", subscription_id: str = "sub_test_1",
                 status: str = "active", price: str = "", **kwargs) -> dict:
    items = [{"object": "subscription_item", "price": {"id": price, "object": "price"}}] if price else []
    return event(kind, {"id": subscription_id, "object": "subscription", "customer": customer, "status": status,
                        "items": {"object": "list", "data": items}}, **kwargs)
