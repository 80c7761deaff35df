"""The one place that talks to Stripe, through its official library: Checkout and billing
portal sessions, and the verification of webhook signatures. Everything else in billing
works on plain dicts and our own models, so tests replace this boundary (or point
STRIPE_API_BASE at a local stub) and never reach Stripe's servers."""

from __future__ import annotations

import json
from dataclasses import dataclass

import stripe
from django.conf import settings

REQUEST_TIMEOUT_SECONDS = 20  # a customer waits on the page for this: well under a proxy's minute


class PaymentsUnavailable(Exception):
    """Stripe did not make the session (unreachable, a refused key, a bad price id)."""


class SignatureInvalid(Exception):
    """A webhook whose Stripe-Signature does not verify with STRIPE_WEBHOOK_SECRET."""


class EventInvalid(Exception):
    """A verified webhook whose payload is not a Stripe event."""


@dataclass(frozen=True)
class HostedSession:
    id: str
    url: str


def checkout_configured() -> bool:
    return bool(settings.STRIPE_SECRET_KEY)


def webhooks_configured() -> bool:
    return bool(settings.STRIPE_WEBHOOK_SECRET)


def _client() -> stripe.StripeClient:
    addresses = {"api": settings.STRIPE_API_BASE} if settings.STRIPE_API_BASE else None
    return stripe.StripeClient(
        settings.STRIPE_SECRET_KEY, base_addresses=addresses, max_network_retries=1,
        http_client=stripe.HTTPXClient(timeout=REQUEST_TIMEOUT_SECONDS, allow_sync_methods=True))


def checkout_session_create(*, price_id: str, account_id: int, plan_name: str, customer_id: str | None,
                            email: str, success_url: str, cancel_url: str) -> HostedSession:
    """A hosted Checkout session selling one subscription to the price. Our account id
    travels as client_reference_id and in the metadata, so the completed session's webhook
    names the account and the plan it bought."""
    metadata = {"account_id": str(account_id), "plan": plan_name}
    params = {
        "mode": "subscription",
        "line_items": [{"price": price_id, "quantity": 1}],
        "client_reference_id": str(account_id),
        "metadata": metadata,
        "subscription_data": {"metadata": metadata},
        "success_url": success_url,
        "cancel_url": cancel_url,
    }
    if customer_id:
        params["customer"] = customer_id
    else:
        params["customer_email"] = email
    try:
        session = _client().v1.checkout.sessions.create(params=params)
    except stripe.StripeError as exc:
        raise PaymentsUnavailable(str(exc.user_message or exc)) from exc
    return HostedSession(id=session.id, url=session.url)


def portal_session_create(*, customer_id: str, return_url: str, subscription_id: str | None = None,
                          flow: str | None = None) -> HostedSession:
    """Stripe's billing portal for the customer: payment method, invoices, cancelling; with
    a subscription and a flow ("subscription_update" or "subscription_cancel"), opened on
    switching its plan or on cancelling it (the plans offered there are set up in Stripe's
    portal configuration)."""
    params: dict = {"customer": customer_id, "return_url": return_url}
    if subscription_id and flow:
        params["flow_data"] = {"type": flow, flow: {"subscription": subscription_id}}
    try:
        session = _client().v1.billing_portal.sessions.create(params=params)
    except stripe.StripeError as exc:
        raise PaymentsUnavailable(str(exc.user_message or exc)) from exc
    return HostedSession(id=session.id, url=session.url)


def event_verified(*, payload: bytes, signature: str | None) -> dict:
    """The webhook's event as a plain dict, once its Stripe-Signature header verifies
    (HMAC-SHA256 of "timestamp.payload" with the webhook secret, within the tolerance).
    The library's own check, the one Webhook.construct_event starts with; its event object
    would then be built from a payload that may not be an object at all (a signed `[1]`
    raises AttributeError inside it), so the JSON is read here."""
    try:
        stripe.WebhookSignature.verify_header(payload, signature or "", settings.STRIPE_WEBHOOK_SECRET,
                                              tolerance=settings.STRIPE_WEBHOOK_TOLERANCE_SECONDS)
    except stripe.SignatureVerificationError as exc:
        raise SignatureInvalid(str(exc)) from exc
    except UnicodeDecodeError as exc:
        raise SignatureInvalid("The payload is not UTF-8 text.") from exc
    try:
        event = json.loads(payload)
    except ValueError as exc:
        raise EventInvalid("The payload is not JSON.") from exc
    if not isinstance(event, dict) or not isinstance(event.get("id"), str) or not event["id"]:
        raise EventInvalid("The payload is not a Stripe event (an object with an id).")
    return event
