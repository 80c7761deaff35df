"""Functions that read plans and usage."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

from .models import UsageCounter


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
