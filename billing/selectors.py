"""Functions that read plans and usage."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

from .models import Plan, UsageCounter


def plans_offered() -> list[Plan]:
    """The plans as the public pages list them: cheapest and smallest first."""
    return list(Plan.objects.order_by("monthly_requests", "pair_price_usd", "name"))


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


def pair_bills_month(*, account, now: datetime, pair_price_usd) -> list[PairBill]:
    """Pairs billed this UTC month: a pair-day is a UTC day on which the pair was
    subscribed at any moment; the price per pair-month is charged pro rata per pair-day."""
    from .models import PairBillingPeriod

    start, end = month_bounds(now)
    days_in_month = (end - start).days
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
    price = float(pair_price_usd)
    return [PairBill(pair_path=info[pid][0], days=len(d), metrics=info[pid][1],
                     cost_usd=round(price * len(d) / days_in_month, 2), open_now=info[pid][2])
            for pid, d in sorted(days.items(), key=lambda item: info[item[0]][0])]
