from decimal import Decimal

from django import template

register = template.Library()


@register.filter
def usd(amount) -> str:
    """$49 or $12.50: whole dollars without cents."""
    value = Decimal(amount or 0)
    return f"${value:,.0f}" if value == value.to_integral_value() else f"${value:,.2f}"


@register.filter
def human_bytes(size) -> str:
    """1 GiB, 50 GiB, 10 MiB: quotas are round binary sizes."""
    value = float(size or 0)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024 or unit == "PiB":
            return f"{value:,.0f} {unit}" if value == int(value) else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{size} B"
