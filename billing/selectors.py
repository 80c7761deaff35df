"""Functions that read plans and usage."""

from __future__ import annotations

from datetime import datetime, timezone


def month_bounds(now: datetime) -> tuple[datetime, datetime]:
    """Start of the UTC month holding `now`, and start of the next one."""
    now = now.astimezone(timezone.utc)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    end = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
    return start, end


def iso_utc(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
