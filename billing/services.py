"""Functions that write plans and billing state."""

from __future__ import annotations

from decimal import Decimal

from django.db import transaction

from .models import Plan

GIB = 1024**3

DEFAULT_PLANS = {
    "free": {"features": [], "monthly_requests": 1_000, "monthly_bytes": 10 * 1024**2,
             "pair_price_usd": Decimal("0")},
    "pro": {"features": ["api", "streaming"], "monthly_requests": 1_000_000,
            "monthly_bytes": 50 * GIB, "pair_price_usd": Decimal("20.00")},
    "enterprise": {"features": ["api", "streaming"], "monthly_requests": 20_000_000,
                   "monthly_bytes": 1024 * GIB, "pair_price_usd": Decimal("12.00")},
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
                pair_price_usd: Decimal | None = None) -> Plan:
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
