"""Functions that read plans and usage."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

from .models import Plan, UsageCounter


def streaming_plan_refusal(account):
    """403 plan_forbidden when the account's plan lacks streaming, else None: what every
    streaming endpoint asks (DRF's HasStreamingAccess) and the SSE feed with it."""
    from config.api.errors import PlanForbidden

    if not account.plan.allows_streaming:
        return PlanForbidden("The account's plan does not include the streaming feature; "
                             "upgrade to Pro or Enterprise.")
    return None


def streaming_refusal(account):
    """Why the account may not stream now, as the error the caller raises or shows (403
    plan_forbidden: the plan lacks streaming; 402 payment_required: the payment lapsed,
    which refuses the SSE feed only, API.md), or None. The one statement of this rule: the
    SSE connect, the open streams' re-check and the Live page's token all ask it."""
    from config.api.errors import PaymentRequired

    plan = streaming_plan_refusal(account)
    if plan is not None:
        return plan
    if not account.payment_active:
        return PaymentRequired("The account's payment has lapsed; update the payment method to stream.",
                               details={"reason": "payment_lapsed"})
    return None


def month_bounds(now: datetime) -> tuple[datetime, datetime]:
    """Start of the UTC month holding `now`, and start of the next one."""
    now = now.astimezone(timezone.utc)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    end = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
    return start, end


def iso_utc(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_utc_ms(epoch_ms: int) -> str:
    """An epoch-ms instant as ISO 8601 UTC with milliseconds (`2026-11-27T23:50:12.345Z`)."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


@dataclass(frozen=True)
class MonthUsage:
    start: datetime
    end: datetime
    requests: int
    bytes: int
    days: list[tuple[date, int, int]]  # every day of the month: (day, requests, bytes)


def usage_month(*, account_id: int, now: datetime) -> MonthUsage:
    start, end = month_bounds(now)
    rows = UsageCounter.objects.filter(account_id=account_id, period_start__gte=start.date(),
                                       period_start__lt=end.date()).values_list("period", "period_start",
                                                                                "requests", "bytes")
    month = (0, 0)
    per_day: dict[date, tuple[int, int]] = {}
    for period, period_start, requests, bytes_ in rows:
        if period == UsageCounter.Period.MONTH:
            month = (requests, bytes_)
        else:
            per_day[period_start] = (requests, bytes_)
    days = []
    day = start.date()
    while day < end.date():
        days.append((day, *per_day.get(day, (0, 0))))
        day += timedelta(days=1)
    return MonthUsage(start=start, end=end, requests=month[0], bytes=month[1], days=days)


@dataclass(frozen=True)
class PairBill:
    pair_path: str
    days: int
    metrics: str
    cost_usd: float
    open_now: bool


def pair_days_cost_usd(*, pair_price_usd, pair_days: int, days_in_month: int) -> float:
    """The pricing rule: the price per pair-month, charged pro rata per pair-day."""
    return round(float(pair_price_usd) * pair_days / days_in_month, 2)


def _pair_days_month(*, account, now: datetime) -> tuple[dict[int, set], dict]:
    """The UTC days of this month on which each pair was subscribed at any moment, and each
    pair's (path, metrics, open now)."""
    from .models import PairBillingPeriod

    start, end = month_bounds(now)
    periods = (PairBillingPeriod.objects.filter(account=account, started_at__lt=end)
               .exclude(ended_at__lt=start).select_related("pair__exchange", "pair__base", "pair__quote")
               .order_by("pair_id", "started_at"))
    days: dict[int, set] = {}
    info: dict[int, tuple[str, str, bool]] = {}
    for period in periods:
        first = max(period.started_at, start)
        last = min(period.ended_at or now, end - timedelta(microseconds=1), now)
        day = first.date()
        while day <= last.date():
            days.setdefault(period.pair_id, set()).add(day)
            day += timedelta(days=1)
        info[period.pair_id] = (period.pair.path, period.metrics, period.ended_at is None)
    return days, info


@dataclass(frozen=True)
class SubscribeCharge:
    pair_days: int  # the pair-days subscribing now to the month's end adds
    cost_usd: float


def subscribe_charges_month(*, account, pair_ids, now: datetime, pair_price_usd) -> dict[int, SubscribeCharge]:
    """What subscribing each pair now and keeping it to the end of the UTC month adds to
    this month's bill: today and every day left, less the days already billed for the
    pair, priced by the same rule as the bill."""
    start, end = month_bounds(now)
    days_in_month = (end - start).days
    billed_days = _pair_days_month(account=account, now=now)[0]
    today = now.astimezone(timezone.utc).date()
    rest = {today + timedelta(days=n) for n in range((end.date() - today).days)}

    def cost(days: int) -> float:
        return pair_days_cost_usd(pair_price_usd=pair_price_usd, pair_days=days, days_in_month=days_in_month)

    charges = {}
    for pair_id in pair_ids:
        billed = billed_days.get(pair_id, set())
        charges[pair_id] = SubscribeCharge(pair_days=len(rest - billed),
                                           cost_usd=round(cost(len(billed | rest)) - cost(len(billed)), 2))
    return charges


def pair_bills_month(*, account, now: datetime, pair_price_usd) -> list[PairBill]:
    """Pairs billed this UTC month: a pair-day is a UTC day on which the pair was
    subscribed at any moment; the price per pair-month is charged pro rata per pair-day."""
    start, end = month_bounds(now)
    days_in_month = (end - start).days
    days, info = _pair_days_month(account=account, now=now)
    return [PairBill(pair_path=info[pid][0], days=len(d), metrics=info[pid][1],
                     cost_usd=pair_days_cost_usd(pair_price_usd=pair_price_usd, pair_days=len(d),
                                                 days_in_month=days_in_month),
                     open_now=info[pid][2])
            for pid, d in sorted(days.items(), key=lambda item: info[item[0]][0])]


def plans_public() -> list:
    """The plans a visitor or customer may choose from (staff's `listed` plans), cheapest
    first: what the plan page and the landing page show."""
    return list(Plan.objects.filter(is_public=True).order_by("monthly_price_usd", "monthly_requests", "name"))


def upgrade_refusal(*, account, plan) -> str | None:
    """Why the account cannot buy `plan` through Stripe Checkout now, in words for the plan
    page, or None when it can."""
    from . import payments

    if not payments.checkout_configured() or not plan.stripe_price_id:
        return f"Moving to {plan.name} is arranged with our staff: write to us and we set it up."
    if not plan.is_public:
        return f"The plan {plan.name} is not offered."
    if plan.pk == account.plan_id:
        return f"The account is already on {plan.name}."
    mapping = getattr(account, "stripe_customer", None)
    if mapping is not None and mapping.subscription_id:
        return "The account has a subscription already: change its plan in the billing portal."
    return None


@dataclass(frozen=True)
class PlanChoice:
    plan: object
    current: bool
    action: str  # "checkout", "portal" (switch or cancel the subscription), "staff" or "" (current)


@dataclass(frozen=True)
class PaymentStanding:
    plan: object
    payment: str
    payment_active: bool
    self_served: bool  # Stripe keys configured on this deployment
    customer_id: str  # the Stripe customer paying, or ""
    subscription_id: str
    choices: list[PlanChoice]
    events: list  # the account's latest StripeEvent rows


def payment_standing(*, account, events: int = 5) -> PaymentStanding:
    """The account's plan, payment standing and Stripe subscription, with each public
    plan and how this account can move to it."""
    from . import payments
    from .models import StripeCustomer, StripeEvent

    mapping = StripeCustomer.objects.filter(account=account).first()
    self_served = payments.checkout_configured()
    choices = []
    plans = plans_public()
    if account.plan_id not in {plan.pk for plan in plans}:
        plans = [account.plan, *plans]  # a plan made for this account is shown as its own
    for plan in plans:
        current = plan.pk == account.plan_id
        subscribed = self_served and mapping is not None and bool(mapping.subscription_id)
        if current:
            action = ""
        elif subscribed and (plan.stripe_price_id or plan.monthly_price_usd == 0):
            action = "portal"  # switch the subscription's price, or cancel it for a free plan
        elif not self_served or not plan.stripe_price_id:
            action = "staff"
        else:
            action = "checkout"
        choices.append(PlanChoice(plan=plan, current=current, action=action))
    return PaymentStanding(
        plan=account.plan, payment=account.payment, payment_active=account.payment_active,
        self_served=self_served, customer_id=mapping.customer_id if mapping else "",
        subscription_id=mapping.subscription_id if mapping else "", choices=choices,
        events=list(StripeEvent.objects.filter(account=account).order_by("-received_at")[:events]))


@dataclass(frozen=True)
class UsageLine:
    """Requests and bytes of one key, or one endpoint, this month."""

    label: str
    detail: str  # the key's display prefix, or ""
    revoked: bool
    requests: int
    bytes: int
    last_request_ms: int


@dataclass(frozen=True)
class UsageBreakdown:
    by_key: list[UsageLine]
    by_endpoint: list[UsageLine]


def usage_breakdown_month(*, account_id: int, now: datetime) -> UsageBreakdown:
    """This UTC month's counted requests and bytes per key and per endpoint, busiest first."""
    from .models import KeyEndpointUsage

    start, _ = month_bounds(now)
    rows = (KeyEndpointUsage.objects.filter(account_id=account_id, month=start.date())
            .select_related("api_key").order_by("api_key__created_at", "endpoint"))
    keys: dict[int, list] = {}
    endpoints: dict[str, list] = {}
    for row in rows:
        key = keys.setdefault(row.api_key_id, [row.api_key, 0, 0, 0])
        endpoint = endpoints.setdefault(row.endpoint, [row.endpoint, 0, 0, 0])
        for total in (key, endpoint):
            total[1] += row.requests
            total[2] += row.bytes
            total[3] = max(total[3], row.last_request_ms)
    by_key = [UsageLine(label=api_key.name, detail=api_key.display, revoked=not api_key.is_live,
                        requests=requests, bytes=bytes_, last_request_ms=last)
              for api_key, requests, bytes_, last in keys.values()]
    by_endpoint = [UsageLine(label=endpoint, detail="", revoked=False, requests=requests, bytes=bytes_,
                             last_request_ms=last)
                   for endpoint, requests, bytes_, last in endpoints.values()]
    busiest = lambda line: (-line.requests, -line.bytes, line.label)  # noqa: E731
    return UsageBreakdown(by_key=sorted(by_key, key=busiest), by_endpoint=sorted(by_endpoint, key=busiest))
