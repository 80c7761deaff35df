"""Account A's keys and session never read or change account B's subscriptions, usage or
keys, on any route.

Routes are enumerated from the URLconf (plus the SSE feed, which config.asgi routes ahead
of Django); each has a check below, and a route without one fails
test_every_route_has_an_idor_check. Every check runs A's requests against a world where B
holds subscriptions (one on the same pair as A, with fewer metrics), usage and two keys,
and asserts that B's rows are exactly as before and that nothing of B's shows in A's
answers."""

from __future__ import annotations

from typing import Callable

import pytest
from django.core import signing
from django.test import Client
from rest_framework.test import APIClient

from accounts.models import ApiKey
from billing.selectors import usage_month
from config import clock
from config.api.errors import PaymentRequired, Unauthorized
from streaming.models import StreamSubscription
from streaming.sse_auth import TOKEN_SALT, _authorize

from tests.urlconf import url_routes

from .conftest import PASSWORD, Customer, account_state

BTC, ETH = "binance/BTC/USDT", "coinbase/ETH/USD"  # A: BTC (all metrics); B: BTC (trade), ETH
EVENTS_ROUTE = "api/v1/streams/<str:exchange>/<str:base>/<str:quote>/events (ASGI)"


def enumerate_routes():
    """Every route of the URLconf as its pattern text; the admin site counts as one."""
    return url_routes(whole=("admin/",))


def asgi_routes():
    """Routes config.asgi serves without Django's URLconf."""
    from streaming import sse

    assert any(route.pattern.match("api/v1/streams/binance/BTC/USDT/events") for route in sse.urlpatterns)
    return [EVENTS_ROUTE]


class World:
    def __init__(self, a: Customer, b: Customer):
        self.a, self.b = a, b
        self.api = APIClient()
        self.api.credentials(HTTP_AUTHORIZATION=f"Bearer {a.key}")
        self.web = a.web()
        self.b_keys = list(ApiKey.objects.filter(account=b.account))
        self.b_subscriptions = list(StreamSubscription.objects.filter(account=b.account).select_related("pair"))

    def b_traces(self) -> list[str]:
        """Strings that only B's data would put into a response."""
        traces = [self.b.email]
        for key in self.b_keys:
            traces += [key.lookup_id, key.name]
        return traces

    def assert_nothing_of_b(self, response, *, typed: str = "") -> None:
        """`typed`: what the request itself sent (an address typed into a form), echoed back."""
        text = response.content.decode("utf-8", "replace").replace(typed or "\0", "")
        for trace in self.b_traces():
            assert trace not in text, f"B's {trace!r} shown to A"

    def a_usage(self):
        return usage_month(account_id=self.a.account.pk, now=clock.utcnow())


# -- web pages ----------------------------------------------------------------------------

def check_home(w: World):
    response = w.web.get("/")
    assert response.status_code == 302 and response["Location"] == "/account/keys/"


def check_signin(w: World):
    assert w.web.get("/signin/").status_code == 302  # already signed in: straight to A's keys
    other = Client()
    response = other.post("/signin/", {"username": w.b.email, "password": "not B's password"})
    assert response.status_code == 200 and "_auth_user_id" not in other.session
    w.assert_nothing_of_b(w.web.get("/account/keys/"))


def check_signout(w: World):
    b_web = w.b.web()
    assert Client().post("/signout/").status_code == 302
    web = w.a.web()
    assert web.post("/signout/").status_code == 302
    assert b_web.get("/account/keys/").status_code == 200, "A signing out ended B's session"


def check_signup(w: World):
    """Signing up with B's address changes nothing of B's and shows nothing of B's."""
    assert w.web.get("/signup/").status_code == 302  # A is signed in: straight to A's keys
    for url, data in (("/signup/", {"email": w.b.email, "password1": "a new passphrase here",
                                    "password2": "a new passphrase here"}),
                      ("/signup/resend/", {"email": w.b.email})):
        response = Client().post(url, data, follow=True)
        assert response.status_code == 200
        w.assert_nothing_of_b(response, typed=w.b.email)
    assert Client().login(email=w.b.email, password=PASSWORD)


def check_signup_sent(w: World):
    w.assert_nothing_of_b(Client().get("/signup/sent/"))


def check_signup_confirm(w: World):
    """A link naming B with any token but B's confirms nothing."""
    from django.utils.encoding import force_bytes
    from django.utils.http import urlsafe_base64_encode

    from accounts.tokens import signup_token_generator

    b_uid = urlsafe_base64_encode(force_bytes(w.b.account.users.get().pk))
    a_token = signup_token_generator.make_token(w.a.account.users.get())
    response = Client().get(f"/signup/confirm/{b_uid}/{a_token}/", follow=True)
    w.assert_nothing_of_b(response)


def check_password_reset(w: World):
    from django.core import mail

    before = len(mail.outbox)
    response = Client().post("/password/reset/", {"email": w.a.email}, follow=True)
    w.assert_nothing_of_b(response)
    assert [m.to for m in mail.outbox[before:]] == [[w.a.email]]


def check_password_reset_sent(w: World):
    w.assert_nothing_of_b(Client().get("/password/reset/sent/"))


def check_password_reset_confirm(w: World):
    """A's reset token on B's link sets no password of B's."""
    from django.contrib.auth.tokens import default_token_generator
    from django.utils.encoding import force_bytes
    from django.utils.http import urlsafe_base64_encode

    b_uid = urlsafe_base64_encode(force_bytes(w.b.account.users.get().pk))
    a_token = default_token_generator.make_token(w.a.account.users.get())
    client = Client()
    page = client.get(f"/password/reset/{b_uid}/{a_token}/", follow=True)
    assert "no longer works" in page.content.decode()
    client.post(f"/password/reset/{b_uid}/set-password/", {"new_password1": "taken over 123",
                                                            "new_password2": "taken over 123"})
    assert Client().login(email=w.b.email, password=PASSWORD)


def check_password_reset_complete(w: World):
    w.assert_nothing_of_b(Client().get("/password/reset/done/"))


def check_keys_page(w: World):
    response = w.web.get("/account/keys/")
    assert response.status_code == 200
    assert response.context["account"] == w.a.account
    assert {k.pk for k in response.context["keys"]} == {k.api_key.pk for k in w.a.keys}
    w.assert_nothing_of_b(response)
    from accounts.services import api_key_revoke
    from tests.accounts.test_web_pages import _nonce

    api_key_revoke(api_key=w.a.keys[1].api_key, via="command")  # room under A's cap
    created = w.web.post("/account/keys/", {"name": "idor", "nonce": _nonce(w.web.get("/account/keys/")
                                                                             .content.decode())})
    assert created.status_code == 200 and created.context["created"].api_key.account == w.a.account
    w.assert_nothing_of_b(created)


def check_revoke_confirm(w: World):
    for key in w.b_keys:
        url = f"/account/keys/{key.pk}/revoke/"
        assert w.web.get(url).status_code == 404
        assert w.web.post(url).status_code == 404
    assert w.web.get(f"/account/keys/{w.a.keys[0].api_key.pk}/revoke/").status_code == 200


def check_rename_page(w: World):
    for key in w.b_keys:
        url = f"/account/keys/{key.pk}/rename/"
        assert w.web.get(url).status_code == 404
        assert w.web.post(url, {"name": "taken over"}).status_code == 404
        key.refresh_from_db()
        assert key.name != "taken over"
    assert w.web.get(f"/account/keys/{w.a.keys[0].api_key.pk}/rename/").status_code == 200


def check_usage_page(w: World):
    response = w.web.get("/account/usage/")
    assert response.status_code == 200
    assert response.context["account"] == w.a.account
    assert response.context["usage"] == w.a_usage()
    w.assert_nothing_of_b(response)


def check_streams_page(w: World):
    response = w.web.get("/account/streams/")
    assert response.status_code == 200
    assert [row["subscription"].account_id for row in response.context["rows"]] == [w.a.account.pk]
    html = response.content.decode()
    mine = html[html.index('id="subscriptions"'):html.index('id="picker"')]
    assert ETH not in mine  # only B subscribes to it (the picker lists the whole catalog)
    assert f'data-pair="{ETH}"' in html and "Subscribe to " + ETH in html  # not subscribed, for A
    w.assert_nothing_of_b(response)


def check_unsubscribe(w: World):
    for subscription in w.b_subscriptions:
        assert w.web.post(f"/account/streams/{subscription.pk}/unsubscribe/").status_code == 404
        assert w.web.get(f"/account/streams/{subscription.pk}/unsubscribe/").status_code == 405


def check_live_page(w: World):
    response = w.web.get("/account/live/")
    assert response.status_code == 200
    assert {s.account_id for s in response.context["subscriptions"]} == {w.a.account.pk}
    assert ETH not in response.content.decode()


def check_live_open(w: World):
    """Only A's own subscriptions open: B's pair is "not subscribed" for A, with no token."""
    body = w.web.get(f"/account/live/{ETH}/open/").json()
    assert body["refusal"]["details"]["reason"] == "not_subscribed" and "events_url" not in body
    own = w.a.subscriptions[BTC]
    body = w.web.get(f"/account/live/{BTC}/open/").json()
    claims = signing.loads(body["events_url"].split("token=")[1], salt=TOKEN_SALT)
    assert claims["a"] == w.a.account.pk and claims["p"] == own.pair_id
    assert body["metrics"] == own.metrics  # A's metrics, not B's narrower set on the same pair


def check_subscribe_page(w: World):
    """Subscribing from the page writes A's subscription only; B's stays as it was."""
    before = {s.pk: s.metrics for s in w.b_subscriptions}
    exchange, base, quote = ETH.split("/")
    response = w.web.post("/account/streams/subscribe/", {"exchange": exchange, "base": base, "quote": quote,
                                                         "metrics": ["trade"]})
    assert response.status_code == 302
    assert StreamSubscription.objects.get(account=w.a.account, pair__base__symbol=base).metrics == ["trade"]
    assert {s.pk: s.metrics for s in StreamSubscription.objects.filter(account=w.b.account)} == before


def check_admin(w: World):
    """A customer is not staff: the admin shows none of B's rows to A."""
    for url in ["/admin/", "/admin/accounts/apikey/", f"/admin/accounts/apikey/{w.b_keys[0].pk}/change/",
                "/admin/streaming/streamsubscription/", "/admin/billing/usagecounter/",
                f"/admin/accounts/apikey/{w.b_keys[0].pk}/delete/"]:
        for method in ("get", "post"):
            response = getattr(w.web, method)(url)
            assert response.status_code == 302 and "/admin/login/" in response["Location"], (url, method)


def check_plan_page(w: World):
    response = w.web.get("/account/plan/")
    assert response.status_code == 200
    assert response.context["account"] == w.a.account
    w.assert_nothing_of_b(response)


def _b_pays_through_stripe(w: World):
    from billing.models import StripeCustomer

    return StripeCustomer.objects.get_or_create(account=w.b.account, defaults={
        "customer_id": "cus_b_security", "subscription_id": "sub_b_security"})[0]


def check_plan_checkout(w: World):
    """A's checkout names A, never B, whatever A posts."""
    from unittest import mock

    from billing import payments

    _b_pays_through_stripe(w)
    with mock.patch.object(payments, "checkout_configured", return_value=True), \
            mock.patch.object(payments, "checkout_session_create",
                              return_value=payments.HostedSession(id="cs_x", url="https://stripe.test/cs_x")) as made:
        w.a.account.plan.__class__.objects.filter(name="enterprise").update(stripe_price_id="price_x")
        response = w.web.post("/account/plan/checkout/", {"plan": "enterprise", "account": w.b.account.pk,
                                                          "customer": "cus_b_security"})
    assert response.status_code == 302
    assert made.call_args.kwargs["account_id"] == w.a.account.pk
    assert made.call_args.kwargs["customer_id"] is None and made.call_args.kwargs["email"] == w.a.email


def check_plan_portal(w: World):
    """A, who has no Stripe customer, never reaches B's billing portal."""
    from unittest import mock

    from billing import payments

    _b_pays_through_stripe(w)
    with mock.patch.object(payments, "checkout_configured", return_value=True), \
            mock.patch.object(payments, "portal_session_create") as made:
        response = w.web.post("/account/plan/billing-portal/", {"customer": "cus_b_security"})
    assert response.status_code == 409 and not made.called
    w.assert_nothing_of_b(response)


def check_stripe_webhook(w: World):
    """Only Stripe's signature moves an account: A's session and key move nothing."""
    from billing.models import StripeEvent

    for client in (w.web, w.api):
        response = client.post("/api/billing/stripe/webhook", {"type": "invoice.payment_failed"},
                               content_type="application/json")
        assert response.status_code in (400, 404)
    assert not StripeEvent.objects.exists()
    assert w.b.account.__class__.objects.get(pk=w.b.account.pk).payment == "active"


def check_healthz(w: World):
    w.assert_nothing_of_b(w.api.get("/healthz"))


# -- API ----------------------------------------------------------------------------------

def _usage_body_is_as(w: World, body: dict):
    usage = w.a_usage()
    assert body["requests"]["used"] == usage.requests and body["bytes"]["used"] == usage.bytes
    assert body["streams"]["pairs"] == 1


def check_me_usage(w: World):
    _usage_body_is_as(w, w.api.get("/api/v1/me/usage").json())


def check_me_usage_alias(w: World):
    _usage_body_is_as(w, w.api.get("/v1/me/usage").json())


def _series(endpoint: str):
    def check(w: World):
        before = w.a_usage().requests
        response = w.api.post(f"/api/v1/market/{endpoint}", {"exchange": "binance", "symbol": "BTC-USDT",
                                                             "start": "2024-01-01", "end": "2024-01-03"},
                              format="json")
        assert response.status_code == 200
        assert w.a_usage().requests == before + 1  # counted on A
    return check


def check_rank_top(w: World):
    before = w.a_usage().requests
    assert w.api.get("/api/v1/rank/top?exchange=binance").status_code == 200
    assert w.a_usage().requests == before + 1


def check_streams(w: World):
    pairs = {f"{p['exchange']}/{p['base']}/{p['quote']}": p for p in w.api.get("/api/v1/streams").json()["pairs"]}
    assert pairs[ETH]["subscribed"] is False and pairs[ETH]["metrics"] == []
    assert pairs[BTC]["metrics"] == ["trade", "book", "quote"]
    created = w.api.post("/api/v1/streams", {"exchange": "coinbase", "base": "ETH", "quote": "USD",
                                             "metrics": ["trade"]}, format="json")
    assert created.status_code == 201 and created.json()["metrics"] == ["trade"]  # B's book/quote not merged in


def check_unsubscribe_api(w: World):
    for path in (ETH, BTC):
        assert w.api.delete(f"/api/v1/streams/{path}").status_code == 204
        assert w.api.delete(f"/api/v1/streams/{path}?metric=trade").status_code == 204


def check_status(w: World):
    assert w.api.get(f"/api/v1/streams/{ETH}/status").status_code == 402  # B's subscription is not A's
    mine = w.api.get(f"/api/v1/streams/{BTC}/status").json()
    assert mine["subscribed"] is True
    assert all(m["subscribed"] for m in mine["metrics"].values())


def check_snapshot(w: World):
    before = w.a_usage().requests
    response = w.api.post(f"/api/v1/streams/{ETH}/snapshot", {"metrics": ["book"], "granularity": "hour"},
                          format="json")
    assert response.status_code == 402  # B's subscription serves nothing to A
    assert w.a_usage().requests == before + 1


def check_live(w: World):
    from market.bars import Bar
    from streaming.live import publish_bars

    btc = w.a.subscriptions[BTC].pair
    publish_bars(pair=btc, bars=[Bar(ts_ms=1_000, trade_count=1, open=1.0, high=1.0, low=1.0, close=1.0,
                                     book_samples=1, bid_amount_sum=1.0, ask_amount_sum=1.0, quote_count=1,
                                     bid_price=1.0, ask_price=2.0)])
    bar = w.api.get(f"/api/v1/streams/{BTC}/live").json()
    assert {"close", "bid_depth", "mid_price"} <= set(bar)  # A's three metrics, not B's trade only


def check_token(w: World):
    assert w.api.post(f"/api/v1/streams/{ETH}/token").status_code == 402  # B's subscription is not A's
    token = w.api.post(f"/api/v1/streams/{BTC}/token").json()["token"]
    claims = signing.loads(token, salt=TOKEN_SALT)
    assert claims["a"] == w.a.account.pk and claims["k"] == w.a.keys[0].api_key.pk
    with pytest.raises(Unauthorized):  # nor does A's token of another pair
        _authorize(None, token, "coinbase", "ETH", "USD", None)


def check_events(w: World):
    with pytest.raises(PaymentRequired):
        _authorize(f"Bearer {w.a.key}", None, "coinbase", "ETH", "USD", None)
    grant = _authorize(f"Bearer {w.a.key}", None, "binance", "BTC", "USDT", None)
    assert grant.account_id == w.a.account.pk and grant.metrics == ["trade", "book", "quote"]


def check_schemes(w: World):
    before = w.a_usage().requests
    assert w.api.get(f"/api/v1/streams/{ETH}/schemes").status_code == 200
    assert w.a_usage().requests == before + 1


def check_schema(w: World):
    response = w.api.get("/api/v1/schema", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    w.assert_nothing_of_b(response)


def check_docs(w: World):
    response = w.api.get("/api/v1/docs")
    assert response.status_code == 200
    w.assert_nothing_of_b(response)


def check_unknown_api_paths(w: World):
    for url in ("/api/v1/accounts/2/keys", "/v1/me/usage/../../keys", "/api/v2/me/usage",
                f"/api/v1/me/usage/{w.b.account.pk}", f"/api/v1/keys/{w.b_keys[0].pk}"):
        for method in ("get", "post", "delete"):
            response = getattr(w.api, method)(url)
            assert response.status_code == 404, (url, method, response.status_code)
            w.assert_nothing_of_b(response)


PAIR_ROUTE = "api/v1/streams/<str:exchange>/<str:base>/<str:quote>"
CHECKS: dict[str, Callable[[World], None]] = {
    "": check_home,
    "signin/": check_signin,
    "signout/": check_signout,
    "signup/": check_signup,
    "signup/sent/": check_signup_sent,
    "signup/resend/": check_signup,
    "signup/confirm/<uidb64>/<token>/": check_signup_confirm,
    "password/reset/": check_password_reset,
    "password/reset/sent/": check_password_reset_sent,
    "password/reset/<uidb64>/<token>/": check_password_reset_confirm,
    "password/reset/done/": check_password_reset_complete,
    "account/keys/": check_keys_page,
    "account/keys/<int:key_id>/revoke/": check_revoke_confirm,
    "account/keys/<int:key_id>/rename/": check_rename_page,
    "account/usage/": check_usage_page,
    "account/plan/": check_plan_page,
    "account/plan/checkout/": check_plan_checkout,
    "account/plan/billing-portal/": check_plan_portal,
    "api/billing/stripe/webhook": check_stripe_webhook,
    "account/streams/": check_streams_page,
    "account/streams/<int:subscription_id>/unsubscribe/": check_unsubscribe,
    "account/live/": check_live_page,
    "account/streams/subscribe/": check_subscribe_page,
    "account/live/<str:exchange>/<str:base>/<str:quote>/open/": check_live_open,
    "admin/": check_admin,
    "healthz": check_healthz,
    "api/v1/me/usage": check_me_usage,
    "v1/me/usage": check_me_usage_alias,
    "api/v1/market/candlestick": _series("candlestick"),
    "api/v1/market/limit-orders": _series("limit-orders"),
    "api/v1/market/trades": _series("trades"),
    "api/v1/market/spread": _series("spread"),
    "api/v1/rank/top": check_rank_top,
    "api/v1/streams": check_streams,
    PAIR_ROUTE: check_unsubscribe_api,
    f"{PAIR_ROUTE}/status": check_status,
    f"{PAIR_ROUTE}/snapshot": check_snapshot,
    f"{PAIR_ROUTE}/live": check_live,
    f"{PAIR_ROUTE}/token": check_token,
    f"{PAIR_ROUTE}/schemes": check_schemes,
    EVENTS_ROUTE: check_events,
    "api/v1/schema": check_schema,
    "api/v1/docs": check_docs,
    "^(?:api/)?v1/(?P<rest>.*)$": check_unknown_api_paths,
    "^api/(?P<rest>.*)$": check_unknown_api_paths,
}


def test_every_route_has_an_idor_check():
    routes = set(enumerate_routes()) | set(asgi_routes())
    missing = sorted(routes - set(CHECKS))
    assert not missing, f"routes without an IDOR check in {__name__}.CHECKS: {missing}"
    stale = sorted(set(CHECKS) - routes)
    assert not stale, f"CHECKS names routes that no longer exist: {stale}"


@pytest.mark.parametrize("route", list(CHECKS))
def test_account_a_never_reads_or_changes_account_bs_data(two_customers, route):
    a, b = two_customers
    world = World(a, b)
    b_before = account_state(b.account)
    CHECKS[route](world)
    assert account_state(b.account) == b_before, f"{route!r} changed B's rows"
