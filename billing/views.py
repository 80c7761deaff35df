from datetime import datetime, timezone

from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

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


# -- the plan page and Stripe ---------------------------------------------------------------

CHECKOUT_REFRESH_SECONDS = 3
CHECKOUT_REFRESH_TRIES = 40  # two minutes of waiting for Stripe's confirmation, then a word


def _checkout_notice(request, account) -> dict | None:
    """What the page says when the customer comes back from Checkout; while Stripe has not
    confirmed, the page looks again every few seconds (static/js/plan.js)."""
    from datetime import timedelta

    from .models import StripeEvent

    outcome = request.GET.get("checkout", "") if request.method == "GET" else ""
    if outcome == "cancelled":
        return {"text": "Checkout cancelled: nothing was charged and your plan is unchanged."}
    if outcome != "success":
        return None
    confirmed = (StripeEvent.objects.filter(account=account, type__startswith="checkout.session.",
                                            received_at__gte=clock.utcnow() - timedelta(minutes=30))
                 .exclude(outcome__startswith="ignored").exclude(outcome__startswith="customer mapped").exists())
    if confirmed:
        return {"text": f"Payment confirmed: the account is on {account.plan.name.capitalize()}."}
    tries = request.GET.get("try", "0")
    tries = int(tries) if tries.isdigit() and len(tries) < 4 else 0
    if tries >= CHECKOUT_REFRESH_TRIES:
        return {"text": "Stripe has not confirmed the payment yet. Your plan changes as soon as it does; "
                        "if you were charged and nothing changes within the hour, write to us."}
    return {"text": "Thank you: Stripe is confirming the payment. Your new plan shows here as soon as it "
                    "confirms, usually within seconds.",
            "refresh_url": f"{reverse('billing:plan')}?checkout=success&try={tries + 1}",
            "refresh_seconds": CHECKOUT_REFRESH_SECONDS}


def _plan_page(request, account, *, error: str | None = None, status: int = 200):
    from .selectors import payment_standing

    context = {"account": account, "standing": payment_standing(account=account), "error": error,
               "notice": _checkout_notice(request, account)}
    return render(request, "billing/plan.html", context, status=status)


@never_cache
@login_required
def plan_page(request):
    """The plans with their features, quotas and prices, the account's plan and payment
    standing, and the way to move to another plan."""
    return _plan_page(request, customer_account_or_404(request))


@never_cache
@login_required
@require_POST
def plan_checkout(request):
    """Start a Stripe Checkout for the chosen plan and send the customer to it."""
    from .forms import PlanChoiceForm
    from .services import UpgradeRefused, checkout_start

    account = customer_account_or_404(request)
    form = PlanChoiceForm(request.POST)
    if not form.is_valid():
        return _plan_page(request, account, error=form.errors["plan"][0], status=400)
    page = request.build_absolute_uri(reverse("billing:plan"))
    try:
        session = checkout_start(account=account, plan=form.cleaned_data["plan"], email=request.user.email,
                                 success_url=f"{page}?checkout=success", cancel_url=f"{page}?checkout=cancelled")
    except UpgradeRefused as exc:
        return _plan_page(request, account, error=str(exc), status=409)
    return redirect(session.url)


@never_cache
@login_required
@require_POST
def plan_portal(request):
    """Stripe's billing portal: the payment method (what a lapsed account needs), invoices,
    cancelling; with a plan chosen, switching the subscription to it."""
    from .forms import PlanChoiceForm
    from .services import UpgradeRefused, portal_start

    account = customer_account_or_404(request)
    plan = None
    if request.POST.get("plan"):
        form = PlanChoiceForm(request.POST)
        if not form.is_valid():
            return _plan_page(request, account, error=form.errors["plan"][0], status=400)
        plan = form.cleaned_data["plan"]
    try:
        session = portal_start(account=account, plan=plan,
                               return_url=request.build_absolute_uri(reverse("billing:plan")))
    except UpgradeRefused as exc:
        return _plan_page(request, account, error=str(exc), status=409)
    return redirect(session.url)


@csrf_exempt  # Stripe posts without our cookies; the signature is the proof
def stripe_webhook(request):
    """Stripe's signed events: verified with STRIPE_WEBHOOK_SECRET, applied once each
    (billing.services.stripe_event_apply). Errors leave in the API's envelope."""
    from config.api.errors import InvalidParameter, MethodNotAllowed, NotFound
    from config.api.middleware import error_response

    from . import payments
    from .services import stripe_event_apply

    if request.method != "POST":
        error = MethodNotAllowed(f"{request.method} is not allowed here; use POST.",
                                 details={"method": request.method, "allowed": ["POST"]},
                                 headers={"Allow": "POST"})
        return error_response(request, error)
    if not payments.webhooks_configured():
        return error_response(request, NotFound("This deployment takes no Stripe webhooks "
                                                "(STRIPE_WEBHOOK_SECRET is not set)."))
    try:
        event = payments.event_verified(payload=request.body, signature=request.headers.get("Stripe-Signature"))
    except payments.SignatureInvalid as exc:
        return error_response(request, InvalidParameter(
            "Stripe-Signature", str(exc), message="The Stripe-Signature header does not verify this payload "
                                                  "with the webhook secret."))
    except payments.EventInvalid as exc:
        return error_response(request, InvalidParameter("body", str(exc)))
    try:
        record = stripe_event_apply(event=event)
    except (ValueError, TypeError, AttributeError, OverflowError) as exc:  # a shape Stripe never sends
        return error_response(request, InvalidParameter("body", f"The event cannot be read: {exc}"))
    if record is None:
        return JsonResponse({"received": True, "id": event["id"], "duplicate": True})
    return JsonResponse({"received": True, "id": record.event_id, "type": record.type, "outcome": record.outcome})
