from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from accounts.views import customer_account_or_404
from billing.selectors import pair_bills_month, streaming_refusal, subscribe_charges_month
from config import clock
from config.api.errors import NotFound, PaymentRequired
from market.selectors import pair_streamable, pairs_streamable_search, streamable_choices
from schemes.selectors import scheme_history

from .models import METRICS
from .selectors import (account_subscription, account_subscriptions, pair_status, pairs_signals,
                        recent_bar_rows, stream_opening, subscription_get)
from .services import subscription_remove, subscription_upsert

PICKER_ROWS = 50
MINUTE_MS = 60_000
HISTORY_MS = 3_600_000  # the Live page's candles start with the last hour of minute bars


def payment_fix_url() -> str:
    """Where the customer updates the payment or the plan: the plan page."""
    return reverse("billing:plan")


def picker_url(pair) -> str:
    query = urlencode({"exchange": pair.exchange.slug, "base": pair.base.symbol, "quote": pair.quote.symbol})
    return f"{reverse('streaming:streams')}?{query}#picker"


class PairSearchForm(forms.Form):
    exchange = forms.CharField(required=False, max_length=40)
    base = forms.CharField(required=False, max_length=40)
    quote = forms.CharField(required=False, max_length=20)


class SubscribeForm(forms.Form):
    exchange = forms.CharField(max_length=40)
    base = forms.CharField(max_length=20)
    quote = forms.CharField(max_length=20)
    metrics = forms.MultipleChoiceField(choices=[(m, m) for m in METRICS], error_messages={
        "required": "Choose at least one metric: trade, book or quote."})


@never_cache
@login_required
def streams_page(request):
    account = customer_account_or_404(request)
    now = clock.utcnow()
    subscriptions = account_subscriptions(account=account)
    mine = {s.pair_id: s for s in subscriptions}
    signals = pairs_signals(pairs=[s.pair for s in subscriptions], now=clock.now_ms())
    rows = [{"subscription": s, "status": pair_status(pair=s.pair, account=account, subscribed=s.metrics,
                                                      signals=signals[s.pair_id])} for s in subscriptions]
    price = account.plan.pair_price_usd
    bills = pair_bills_month(account=account, now=now, pair_price_usd=price)

    search = PairSearchForm(request.GET)
    search.is_valid()  # every field is optional and bounded: what is valid filters
    wanted = {name: search.cleaned_data.get(name, "") for name in ("exchange", "base", "quote")}
    found = list(pairs_streamable_search(**wanted)[:PICKER_ROWS + 1])
    charges = subscribe_charges_month(account=account, pair_ids=[p.pk for p in found], now=now,
                                      pair_price_usd=price)
    picks = [{"pair": pair, "subscription": mine.get(pair.pk), "charge": charges[pair.pk],
              "complete": pair.pk in mine and len(mine[pair.pk].metrics) == len(METRICS)}
             for pair in found[:PICKER_ROWS]]
    exchanges, quotes = streamable_choices()
    return render(request, "streaming/streams.html", {
        "account": account, "rows": rows, "bills": bills,
        "total_usd": round(sum(b.cost_usd for b in bills), 2),
        "pair_days": sum(b.days for b in bills), "price": price,
        "refusal": streaming_refusal(account), "payment_url": payment_fix_url(),
        "search": wanted, "picks": picks, "more": len(found) > PICKER_ROWS,
        "search_errors": [f"not searched by {name}: {error}"
                          for name, errors in search.errors.items() for error in errors],
        "exchanges": exchanges, "quotes": quotes, "metrics": METRICS,
    })


@login_required
@require_POST
def subscribe(request):
    """The picker's subscribe: the service POST /api/v1/streams uses, same rules."""
    account = customer_account_or_404(request)
    form = SubscribeForm(request.POST)
    back = reverse("streaming:streams")
    if not form.is_valid():
        errors = [str(e) for field_errors in form.errors.values() for e in field_errors]
        messages.error(request, " ".join(errors))
        if form.cleaned_data.get("exchange"):
            back += "?" + urlencode({k: form.cleaned_data.get(k, "") for k in ("exchange", "base", "quote")})
        return redirect(back + "#picker")
    given = form.cleaned_data
    search = PairSearchForm(_query_dict(request.POST.get("search", "")))
    if search.is_valid() and any(search.cleaned_data.values()):  # back to the same search
        back = f"{back}?{urlencode(search.cleaned_data)}"
    refusal = streaming_refusal(account)
    if refusal is not None:
        messages.error(request, f"Not subscribed: {refusal.message}")
        return redirect(back + "#picker")
    pair = pair_streamable(exchange=given["exchange"], base=given["base"], quote=given["quote"])
    if pair is None:
        messages.error(request, f"{given['exchange']}/{given['base']}/{given['quote']} is not a pair you can "
                                "stream; search the catalog below.")
        return redirect(back + "#picker")
    subscription, created = subscription_upsert(account=account, pair=pair, metrics=given["metrics"])
    verb = "Subscribed to" if created else "Now subscribed to"
    messages.success(request, f"{verb} {pair.path} ({', '.join(subscription.metrics)}). "
                              "Its live bars are on the Live page.")
    return redirect(back + "#picker")


def _query_dict(text: str):
    from django.http import QueryDict

    return QueryDict(text[:500])


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
    subscriptions = list(account_subscriptions(account=account))
    chosen = request.GET.get("pair", "")
    return render(request, "streaming/live.html", {
        "subscriptions": subscriptions,
        "chosen": chosen if any(s.pair.path == chosen for s in subscriptions) else "",
    })


def _refused(refusal, *, fix_url: str | None, fix_label: str, pair: str) -> JsonResponse:
    """A refusal the page shows: a 200 answer to the page's question "may I follow this
    pair?" (a 4xx would be a console error in the browser for a normal outcome), carrying
    the API's error object and the fix."""
    return JsonResponse({"pair": pair, "refusal": {
        "code": refusal.code, "status": refusal.status_code, "message": refusal.message,
        "details": {**refusal.details, "fix_url": fix_url, "fix_label": fix_label}}})


@never_cache
@login_required
def live_open(request, exchange: str, base: str, quote: str):
    """What the Live page needs to follow one of the customer's pairs: a short-lived
    EventSource URL and, unless `?history=0`, the last hour of minute bars with the stream
    position they end at (the feed resumes right after it, so no second is lost between
    them) and the last hour's scheme events. A refusal names the API's error and the fix:
    where to subscribe the pair again, or to update the payment (`refusal`, beside `pair`)."""
    from .sse_auth import token_issue

    account = customer_account_or_404(request)
    pair = pair_streamable(exchange=exchange, base=base, quote=quote)
    path = f"{exchange}/{base}/{quote}" if pair is None else pair.path
    if pair is None:
        missing = NotFound(f"No streamable pair {path}.", details={"pair": path})
        return JsonResponse(missing.envelope(""), status=missing.status_code)
    refusal = streaming_refusal(account)
    if refusal is not None:
        label = "Update the payment" if refusal.code == "payment_required" else "Change the plan"
        return _refused(refusal, fix_url=payment_fix_url(), fix_label=label, pair=path)
    subscription = subscription_get(account=account, pair=pair)
    if subscription is None:
        refusal = PaymentRequired(f"You no longer subscribe to {path}.", details={"reason": "not_subscribed"})
        return _refused(refusal, fix_url=picker_url(pair), fix_label=f"Subscribe to {path}", pair=path)
    token = token_issue(account_id=account.pk, pair_id=pair.pk, user_id=request.user.pk)
    body = {"pair": pair.path, "metrics": subscription.metrics,
            "events_url": f"/api/v1/streams/{pair.path}/events?token={token}"}
    if request.GET.get("history") != "0":
        _, (bar_ts, scheme_id) = stream_opening(account_id=account.pk, pair=pair)  # read before the bars
        now = clock.now_ms()
        start = (now - HISTORY_MS) // MINUTE_MS * MINUTE_MS
        body["granularity"] = "minute"
        body["bars"] = recent_bar_rows(pair=pair, metrics=subscription.metrics, granularity="minute",
                                       from_ms=start, to_ms=now + MINUTE_MS)
        body["recent_scheme_events"] = scheme_history(pair=pair, start_ms=now - HISTORY_MS, end_ms=now, limit=50)
        if bar_ts:
            body["last_event_id"] = f"{bar_ts}.{scheme_id}"
    return JsonResponse(body)
