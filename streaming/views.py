from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from accounts.views import customer_account_or_404
from billing.selectors import pair_bills_month, streaming_refusal
from config import clock
from config.api.errors import envelope

from schemes.selectors import scheme_history

from .selectors import account_subscription, account_subscriptions, pair_status
from .services import subscription_remove


@never_cache
@login_required
def streams_page(request):
    account = customer_account_or_404(request)
    subscriptions = account_subscriptions(account=account)
    rows = [{"subscription": s, "status": pair_status(pair=s.pair, account=account)} for s in subscriptions]
    bills = pair_bills_month(account=account, now=clock.utcnow(), pair_price_usd=account.plan.pair_price_usd)
    return render(request, "streaming/streams.html", {
        "account": account, "rows": rows, "bills": bills,
        "total_usd": round(sum(b.cost_usd for b in bills), 2),
        "pair_days": sum(b.days for b in bills), "price": account.plan.pair_price_usd,
    })


def _own_subscription_or_404(request, subscription_id: int):
    """The signed-in customer's account and its subscription; another account's is a 404."""
    account = customer_account_or_404(request)
    subscription = account_subscription(account=account, subscription_id=subscription_id)
    if subscription is None:
        raise Http404("No such subscription.")
    return account, subscription


@login_required
@require_POST
def unsubscribe(request, subscription_id: int):
    account, subscription = _own_subscription_or_404(request, subscription_id)
    subscription_remove(account=account, pair=subscription.pair)
    messages.success(request, f"Unsubscribed from {subscription.pair.path}. Billing for it stops today.")
    return redirect("streaming:streams")


@never_cache
@login_required
def live_page(request):
    account = customer_account_or_404(request)
    subscriptions = account_subscriptions(account=account)
    return render(request, "streaming/live.html", {"subscriptions": subscriptions})


@never_cache
@login_required
def live_token(request, subscription_id: int):
    """A short-lived EventSource URL for one of the signed-in customer's subscriptions."""
    from .sse_auth import token_issue

    account, subscription = _own_subscription_or_404(request, subscription_id)
    refusal = streaming_refusal(account)  # the stream would refuse; say why where the page can show it
    if refusal is not None:
        return JsonResponse(envelope(code=refusal.code, message=refusal.message, details=refusal.details,
                                     request_id=""), status=refusal.status_code)
    token = token_issue(account_id=account.pk, pair_id=subscription.pair_id, user_id=request.user.pk)
    now = clock.now_ms()
    recent = scheme_history(pair=subscription.pair, start_ms=now - 3_600_000, end_ms=now, limit=50)
    return JsonResponse({"events_url": f"/api/v1/streams/{subscription.pair.path}/events?token={token}",
                         "pair": subscription.pair.path, "metrics": subscription.metrics,
                         "recent_scheme_events": recent})

