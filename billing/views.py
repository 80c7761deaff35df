from datetime import datetime, timezone

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.cache import never_cache

from accounts.views import customer_account_or_404

from config import clock
from .selectors import usage_breakdown_month, usage_month

CHART_WIDTH, CHART_HEIGHT, CHART_PAD = 720, 180, 28


def human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def _share(used: int, limit: int) -> int:
    return min(100, round(100 * used / limit)) if limit else 100


def _chart(days) -> dict:
    """Bars for requests per day, as plain SVG coordinates (no chart library needed)."""
    peak = max((requests for _, requests, _ in days), default=0) or 1
    slot = (CHART_WIDTH - CHART_PAD) / len(days)
    bars = []
    for index, (day, requests, bytes_) in enumerate(days):
        height = (CHART_HEIGHT - CHART_PAD) * requests / peak
        bars.append({"x": round(CHART_PAD + index * slot + 1, 1), "width": round(max(slot - 2, 1), 1),
                     "y": round(CHART_HEIGHT - CHART_PAD - height, 1), "height": round(height, 1),
                     "day": day, "requests": requests, "bytes": human_bytes(bytes_),
                     "label": day.day if day.day in (1, 8, 15, 22, 29) else None,
                     "label_x": round(CHART_PAD + index * slot + slot / 2, 1)})
    return {"bars": bars, "peak": peak, "width": CHART_WIDTH, "height": CHART_HEIGHT,
            "axis_y": CHART_HEIGHT - CHART_PAD, "pad": CHART_PAD}


def _usage_row(line) -> dict:
    return {"label": line.label, "detail": line.detail, "revoked": line.revoked, "requests": line.requests,
            "bytes": human_bytes(line.bytes),
            "last": datetime.fromtimestamp(line.last_request_ms / 1000, tz=timezone.utc)}


@never_cache
@login_required
def usage_page(request):
    account = customer_account_or_404(request)
    now = clock.utcnow()
    usage = usage_month(account_id=account.pk, now=now)
    breakdown = usage_breakdown_month(account_id=account.pk, now=now)
    plan = account.plan
    context = {
        "account": account,
        "plan": plan,
        "usage": usage,
        "requests_share": _share(usage.requests, plan.monthly_requests),
        "bytes_share": _share(usage.bytes, plan.monthly_bytes),
        "bytes_used": human_bytes(usage.bytes),
        "bytes_limit": human_bytes(plan.monthly_bytes),
        "chart": _chart(usage.days),
        "by_key": [_usage_row(line) for line in breakdown.by_key],
        "by_endpoint": [_usage_row(line) for line in breakdown.by_endpoint],
    }
    return render(request, "billing/usage.html", context)
