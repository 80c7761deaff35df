"""How staff read figures in admin: epoch milliseconds as UTC datetimes, bytes and money
formatted. Free of any domain; each app's admin.py uses these in its display methods."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

from django.template.defaultfilters import filesizeformat


def ms_datetime(epoch_ms: int | None) -> datetime | None:
    """An epoch-ms field as an aware UTC datetime (admin shows it as a date and time)."""
    return None if epoch_ms is None else datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc)


def size(count: int | None) -> str:
    """A byte count as staff read it: `1.2 MB` (Django's filesizeformat, powers of 1024)."""
    return "-" if count is None else filesizeformat(count)


def money(amount: float | Decimal | None) -> str:
    """US dollars with cents and thousands separators: `$1,234.00`."""
    if amount is None:
        return "-"
    return f"-${-amount:,.2f}" if amount < 0 else f"${amount:,.2f}"


def count(number: int | float | None) -> str:
    """A large count with thousands separators (`1,000,000`)."""
    if number is None:
        return "-"
    return f"{number:,.0f}" if isinstance(number, float) else f"{number:,}"
