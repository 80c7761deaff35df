"""Functions that write plans and billing state."""

from __future__ import annotations

from decimal import Decimal

from django.db import transaction

from .models import Plan

GIB = 1024**3

DEFAULT_PLANS = {
    "free": {"features": [], "monthly_requests": 1_000, "monthly_bytes": 10 * 1024**2,
             "pair_price_usd": Decimal("0"), "monthly_price_usd": Decimal("0")},
    "pro": {"features": ["api", "streaming"], "monthly_requests": 1_000_000,
            "monthly_bytes": 50 * GIB, "pair_price_usd": Decimal("20.00"), "monthly_price_usd": Decimal("49.00")},
    "enterprise": {"features": ["api", "streaming"], "monthly_requests": 20_000_000,
                   "monthly_bytes": 1024 * GIB, "pair_price_usd": Decimal("12.00"), "monthly_price_usd": Decimal("990.00")},
}


def parse_features(text: str) -> list[str]:
    features = [f.strip() for f in text.split(",") if f.strip()]
    unknown = sorted(set(features) - set(Plan.FEATURES))
    if unknown:
        raise ValueError(f"Unknown feature(s) {', '.join(unknown)}; "
                         f"known: {', '.join(Plan.FEATURES)}.")
    return features


def plan_upsert(*, name: str, features: list[str] | None = None,
                monthly_requests: int | None = None, monthly_bytes: int | None = None,
                pair_price_usd: Decimal | None = None, monthly_price_usd: Decimal | None = None,
                stripe_price_id: str | None = None) -> Plan:
    """Create or update a plan; omitted fields keep their value (or the model default)."""
    with transaction.atomic():
        plan = Plan.objects.select_for_update().filter(name=name).first() or Plan(name=name)
        if features is not None:
            plan.has_api = Plan.FEATURE_API in features
            plan.has_streaming = Plan.FEATURE_STREAMING in features
        if monthly_requests is not None:
            plan.monthly_requests = monthly_requests
        if monthly_bytes is not None:
            plan.monthly_bytes = monthly_bytes
        if pair_price_usd is not None:
            plan.pair_price_usd = pair_price_usd
        if monthly_price_usd is not None:
            plan.monthly_price_usd = monthly_price_usd
        if stripe_price_id is not None:
            plan.stripe_price_id = stripe_price_id
        plan.full_clean()
        plan.save()
    return plan


def plans_seed_defaults() -> list[Plan]:
    """The seeded plans; existing ones are left as staff edited them."""
    plans = []
    for name, fields in DEFAULT_PLANS.items():
        existing = Plan.objects.filter(name=name).first()
        plans.append(existing or plan_upsert(name=name, **fields))
    return plans


def pair_period_record(*, account, pair, metrics: list[str], now) -> None:
    """Keep the ledger in step with a subscription: close the open stretch when the metric
    set changes (or the pair is dropped), open a new one for a non-empty set. Runs in the
    caller's transaction, beside the subscription write."""
    from .models import PairBillingPeriod

    text = ",".join(metrics)
    open_period = PairBillingPeriod.objects.select_for_update().filter(
        account=account, pair=pair, ended_at__isnull=True).first()
    if open_period is not None and open_period.metrics == text:
        return
    if open_period is not None:
        open_period.ended_at = now
        open_period.save(update_fields=["ended_at"])
    if metrics:
        PairBillingPeriod.objects.create(account=account, pair=pair, metrics=text, started_at=now)


FREE_PLAN = "free"


def plan_free() -> Plan:
    """The plan an account without a paid subscription is on (a new sign-up, a cancelled
    subscription): the seeded `free`, made with its defaults if staff removed it."""
    return Plan.objects.filter(name=FREE_PLAN).first() or plan_upsert(name=FREE_PLAN, **DEFAULT_PLANS[FREE_PLAN])


# -- Stripe: Checkout, the billing portal and the webhooks -----------------------------------

class UpgradeRefused(Exception):
    """Why this account cannot buy this plan through Checkout, in words for the plan page."""


def checkout_start(*, account, plan: Plan, email: str, success_url: str, cancel_url: str):
    """A hosted Checkout session selling `plan` to the account; the customer is sent to its
    URL. Nothing changes on our side until Stripe's signed webhook says the session
    completed (stripe_event_apply)."""
    from . import payments
    from .selectors import upgrade_refusal

    refusal = upgrade_refusal(account=account, plan=plan)
    if refusal:
        raise UpgradeRefused(refusal)
    mapping = getattr(account, "stripe_customer", None)
    try:
        return payments.checkout_session_create(
            price_id=plan.stripe_price_id, account_id=account.pk, plan_name=plan.name,
            customer_id=mapping.customer_id if mapping else None, email=email,
            success_url=success_url, cancel_url=cancel_url)
    except payments.PaymentsUnavailable as exc:
        raise UpgradeRefused("Stripe could not start the checkout, and nothing was charged. "
                             "Try again in a minute.") from exc


def portal_start(*, account, return_url: str, plan: Plan | None = None):
    """Stripe's billing portal for the account's customer: update the payment method, see
    invoices, cancel; with `plan`, straight to switching the subscription to it (cancelling
    it, for a plan Stripe does not sell: the free plan)."""
    from . import payments

    mapping = getattr(account, "stripe_customer", None)
    if mapping is None or not payments.checkout_configured():
        raise UpgradeRefused("This account's payments are arranged with staff.")
    flow = None
    if plan is not None and plan.pk != account.plan_id:
        flow = "subscription_update" if plan.stripe_price_id else "subscription_cancel"
    try:
        return payments.portal_session_create(customer_id=mapping.customer_id, return_url=return_url,
                                              subscription_id=mapping.subscription_id, flow=flow)
    except payments.PaymentsUnavailable as exc:
        raise UpgradeRefused("Stripe could not open the billing portal. Try again in a minute.") from exc


def _object_id(value) -> str:
    """A Stripe reference, sent as an id or as the expanded object."""
    if isinstance(value, dict):
        value = value.get("id")
    return value if isinstance(value, str) else ""


def _invoice_subscription(invoice: dict) -> str:
    """The invoice's subscription: `subscription` up to API version 2025-02, then under
    `parent.subscription_details`."""
    direct = _object_id(invoice.get("subscription"))
    if direct:
        return direct
    parent = invoice.get("parent") or {}
    return _object_id((parent.get("subscription_details") or {}).get("subscription"))


def _invoice_price(invoice: dict) -> str:
    for line in ((invoice.get("lines") or {}).get("data") or []):
        price = line.get("price") or ((line.get("pricing") or {}).get("price_details") or {}).get("price")
        if _object_id(price):
            return _object_id(price)
    return ""


def _subscription_price(subscription: dict) -> str:
    for item in ((subscription.get("items") or {}).get("data") or []):
        if _object_id(item.get("price")):
            return _object_id(item.get("price"))
    return ""


def _plan_of_price(price_id: str) -> Plan | None:
    return Plan.objects.filter(stripe_price_id=price_id).first() if price_id else None


# Subscription statuses (customer.subscription.updated) and the standing they mean; the
# others (incomplete: Checkout still running; canceled: the deleted event) change nothing.
_STANDING_OF_SUBSCRIPTION = {"active": "active", "trialing": "active", "past_due": "lapsed", "unpaid": "lapsed"}


def stripe_event_apply(*, event: dict):
    """Apply one verified Stripe event to the account it concerns, once: the StripeEvent
    row (unique event id) is written in the same transaction as its effect, so a replayed
    or concurrently redelivered event changes nothing. Returns the StripeEvent, or None for
    a replay. Events of types we do not handle are recorded as ignored.

    | event | effect |
    | checkout.session.completed (paid) | customer and subscription mapped; the plan bought; active |
    | invoice.paid / invoice.payment_succeeded | active (a lapsed account is active again) |
    | invoice.payment_failed | lapsed |
    | customer.subscription.updated | the plan of its price; active or lapsed by its status |
    | customer.subscription.deleted | the free plan, active |

    An event created before the last one applied to the account (Stripe does not deliver in
    order) is recorded and changes nothing."""
    from datetime import datetime, timezone

    from django.db import IntegrityError

    from .models import StripeEvent

    event_id = event.get("id")
    if not isinstance(event_id, str) or not event_id:
        raise ValueError("The event has no id.")
    created = datetime.fromtimestamp(int(event.get("created") or 0), tz=timezone.utc)
    event_type = str(event.get("type") or "")[:100]
    obj = ((event.get("data") or {}).get("object")) or {}
    with transaction.atomic():
        try:
            with transaction.atomic():
                record = StripeEvent.objects.create(event_id=event_id[:255], type=event_type,
                                                    created_at=created, outcome="processing")
        except IntegrityError:
            return None  # processed before: Stripe delivers at least once
        handler = _HANDLERS.get(event_type)
        account, outcome = handler(obj, created) if handler and isinstance(obj, dict) else (None, "ignored: not handled")
        record.account = account
        record.outcome = outcome[:200]
        record.save(update_fields=["account", "outcome"])
    return record


def _mapping_of_customer(customer_id: str):
    from .models import StripeCustomer

    if not customer_id:
        return None
    return StripeCustomer.objects.select_for_update().select_related("account").filter(
        customer_id=customer_id).first()


def _standing_apply(*, mapping, created, plan: Plan | None, payment: str | None,
                    subscription_id: str | None = None) -> str:
    """Set the account's plan and payment standing unless a newer event already spoke. The
    standing goes through accounts' own service, so a lapse closes open streams at once;
    a plan change reaches every serving process's next request (ACCOUNT_CACHE_SECONDS) and
    their open streams' grant re-check."""
    from accounts.models import Account
    from accounts.services import account_payment_set

    if mapping.standing_as_of is not None and created < mapping.standing_as_of:
        return "ignored: older than the standing's last event"
    account = Account.objects.select_for_update().get(pk=mapping.account_id)
    changes = []
    if plan is not None and account.plan_id != plan.pk:
        account.plan = plan
        account.save(update_fields=["plan"])
        changes.append(f"plan {plan.name}")
    if payment is not None and account.payment != payment:
        account_payment_set(account=account, payment=payment)
        changes.append(f"payment {payment}")
    if subscription_id is not None:
        mapping.subscription_id = subscription_id
    mapping.standing_as_of = created
    mapping.save(update_fields=["standing_as_of", "subscription_id", "updated_at"])
    mapping.account = account
    return ", ".join(changes) or "no change"


def _on_checkout_completed(session: dict, created):
    from accounts.models import Account

    from .models import StripeCustomer

    if session.get("mode") != "subscription":
        return None, "ignored: not a subscription checkout"
    reference = str(session.get("client_reference_id") or (session.get("metadata") or {}).get("account_id") or "")
    # locked: two sessions of one account completing at once must not both create its mapping
    account = (Account.objects.select_for_update().filter(pk=int(reference)).first()
               if reference.isdigit() and len(reference) < 19 else None)
    if account is None:
        return None, "ignored: no such account"
    customer_id = _object_id(session.get("customer"))
    if not customer_id.startswith("cus_"):
        return account, "ignored: no customer"
    holder = StripeCustomer.objects.select_for_update().filter(customer_id=customer_id).first()
    if holder is not None and holder.account_id != account.pk:
        return account, "ignored: the customer pays for another account"
    mapping = (StripeCustomer.objects.select_for_update().filter(account=account).first()
               or StripeCustomer(account=account, customer_id=customer_id))
    mapping.customer_id = customer_id
    mapping.subscription_id = _object_id(session.get("subscription")) or mapping.subscription_id
    mapping.save()
    if session.get("payment_status") not in ("paid", "no_payment_required"):
        return account, "customer mapped; awaiting payment"
    plan = Plan.objects.filter(name=(session.get("metadata") or {}).get("plan") or "").first()
    return account, _standing_apply(mapping=mapping, created=created, plan=plan, payment="active")


def _subscription_matches(mapping, subscription_id: str) -> bool:
    """An event of an older subscription of the customer (replaced) must not move the
    standing; the first one seen becomes the account's."""
    if subscription_id and not mapping.subscription_id:
        mapping.subscription_id = subscription_id
    return not subscription_id or subscription_id == mapping.subscription_id


def _on_invoice(payment: str):
    def handle(invoice: dict, created):
        mapping = _mapping_of_customer(_object_id(invoice.get("customer")))
        if mapping is None:
            return None, "ignored: unknown customer"
        if not _subscription_matches(mapping, _invoice_subscription(invoice)):
            return mapping.account, "ignored: another subscription"
        plan = _plan_of_price(_invoice_price(invoice)) if payment == "active" else None
        return mapping.account, _standing_apply(mapping=mapping, created=created, plan=plan, payment=payment)
    return handle


def _on_subscription_updated(subscription: dict, created):
    mapping = _mapping_of_customer(_object_id(subscription.get("customer")))
    if mapping is None:
        return None, "ignored: unknown customer"
    if not _subscription_matches(mapping, _object_id(subscription.get("id"))):
        return mapping.account, "ignored: another subscription"
    payment = _STANDING_OF_SUBSCRIPTION.get(str(subscription.get("status")))
    plan = _plan_of_price(_subscription_price(subscription)) if payment == "active" else None
    if payment is None and plan is None:
        return mapping.account, f"ignored: status {subscription.get('status')}"
    return mapping.account, _standing_apply(mapping=mapping, created=created, plan=plan, payment=payment)


def _on_subscription_deleted(subscription: dict, created):
    mapping = _mapping_of_customer(_object_id(subscription.get("customer")))
    if mapping is None:
        return None, "ignored: unknown customer"
    if not _subscription_matches(mapping, _object_id(subscription.get("id"))):
        return mapping.account, "ignored: another subscription"
    return mapping.account, _standing_apply(mapping=mapping, created=created, plan=plan_free(), payment="active",
                                            subscription_id="")


_HANDLERS = {
    "checkout.session.completed": _on_checkout_completed,
    "checkout.session.async_payment_succeeded": _on_checkout_completed,
    "invoice.paid": _on_invoice("active"),
    "invoice.payment_succeeded": _on_invoice("active"),
    "invoice.payment_failed": _on_invoice("lapsed"),
    "customer.subscription.updated": _on_subscription_updated,
    "customer.subscription.deleted": _on_subscription_deleted,
}
