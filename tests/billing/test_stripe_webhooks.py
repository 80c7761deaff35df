"""Stripe's webhooks set the plan and the payment standing: verified signatures (events
signed here with the webhook secret, as Stripe signs them), each event applied once, late
events never undoing newer ones, every bad request a 400 in the API's envelope."""

import time

import pytest
from django.test import Client

from accounts.models import Account
from accounts.services import account_payment_set
from billing.models import StripeCustomer, StripeEvent

from .stripe_events import (WEBHOOK_PATH, WEBHOOK_SECRET, checkout_completed, event, invoice, signature_header,
                            signed, subscription)


@pytest.fixture(autouse=True)
def _stripe(settings):
    settings.STRIPE_WEBHOOK_SECRET = WEBHOOK_SECRET
    settings.STRIPE_SECRET_KEY = ""  # webhooks need only their secret


@pytest.fixture
def prices(plans):
    for name, price in (("pro", "price_test_pro"), ("enterprise", "price_test_enterprise")):
        plans[name].stripe_price_id = price
        plans[name].save()
    return plans


def deliver(stripe_event: dict, **sign):
    body, headers = signed(stripe_event, **sign)
    return Client().post(WEBHOOK_PATH, body, content_type=headers["Content-Type"],
                         HTTP_STRIPE_SIGNATURE=headers["Stripe-Signature"])


def standing(account) -> tuple[str, str]:
    account = Account.objects.select_related("plan").get(pk=account.pk)
    return account.plan.name, account.payment


@pytest.fixture
def subscriber(make_account, prices):
    """A free account that bought Pro through Checkout: customer cus_test_1, sub_test_1."""
    account = make_account(plan="free")
    assert deliver(checkout_completed(account_id=account.pk, plan="pro")).status_code == 200
    return account


def test_a_completed_checkout_maps_the_customer_and_moves_the_account_to_the_bought_plan(make_account, prices):
    account = make_account(plan="free", payment="lapsed")
    response = deliver(checkout_completed(account_id=account.pk, plan="pro", customer="cus_A", subscription="sub_A"))
    assert response.status_code == 200
    assert response.json()["outcome"] == "plan pro, payment active"
    assert standing(account) == ("pro", "active")
    mapping = StripeCustomer.objects.get(account=account)
    assert (mapping.customer_id, mapping.subscription_id) == ("cus_A", "sub_A")


def test_a_checkout_still_awaiting_its_payment_maps_the_customer_and_changes_nothing_else(make_account, prices):
    account = make_account(plan="free")
    response = deliver(checkout_completed(account_id=account.pk, plan="pro", payment_status="unpaid"))
    assert response.json()["outcome"] == "customer mapped; awaiting payment"
    assert standing(account) == ("free", "active")
    assert deliver(invoice("invoice.paid", price="price_test_pro")).json()["outcome"] == "plan pro"
    assert standing(account) == ("pro", "active")


def test_a_failed_renewal_lapses_the_standing_and_a_paid_invoice_makes_it_active_again(subscriber):
    assert deliver(invoice("invoice.payment_failed")).json()["outcome"] == "payment lapsed"
    assert standing(subscriber) == ("pro", "lapsed")
    assert deliver(invoice("invoice.paid")).json()["outcome"] == "payment active"
    assert standing(subscriber) == ("pro", "active")
    assert deliver(invoice("invoice.payment_succeeded")).json()["outcome"] == "no change"


def test_a_lapse_from_stripe_closes_the_accounts_open_streams_like_a_lapse_set_by_staff(
        subscriber, monkeypatch, django_capture_on_commit_callbacks):
    from streaming import live

    told = []
    monkeypatch.setattr(live, "publish_payment_lapsed", lambda *, account_id: told.append(account_id))
    with django_capture_on_commit_callbacks(execute=True):
        deliver(invoice("invoice.payment_failed"))
    assert told == [subscriber.pk]


def test_a_replayed_event_is_applied_once(subscriber):
    failed = invoice("invoice.payment_failed")
    assert deliver(failed).json()["outcome"] == "payment lapsed"
    account_payment_set(account=Account.objects.get(pk=subscriber.pk), payment="active")  # staff settled it

    replay = deliver(failed)
    assert replay.status_code == 200 and replay.json() == {"received": True, "id": failed["id"], "duplicate": True}
    assert standing(subscriber) == ("pro", "active")
    assert StripeEvent.objects.filter(event_id=failed["id"]).count() == 1


def test_an_event_created_before_the_last_applied_one_changes_nothing(subscriber):
    now = int(time.time())
    assert deliver(invoice("invoice.paid", created=now)).status_code == 200
    late = deliver(invoice("invoice.payment_failed", created=now - 60))  # Stripe delivered it late
    assert late.json()["outcome"] == "ignored: older than the standing's last event"
    assert standing(subscriber) == ("pro", "active")


def test_an_invoice_of_another_subscription_of_the_customer_changes_nothing(subscriber):
    response = deliver(invoice("invoice.payment_failed", subscription="sub_replaced"))
    assert response.json()["outcome"] == "ignored: another subscription"
    assert standing(subscriber) == ("pro", "active")


def test_a_deleted_subscription_returns_the_account_to_the_free_plan_in_good_standing(subscriber):
    deliver(invoice("invoice.payment_failed"))
    response = deliver(subscription("customer.subscription.deleted", status="canceled"))
    assert response.json()["outcome"] == "plan free, payment active"
    assert standing(subscriber) == ("free", "active")
    assert StripeCustomer.objects.get(account=subscriber).subscription_id == ""


def test_a_subscription_switched_to_another_price_moves_the_account_to_that_plan(subscriber):
    response = deliver(subscription("customer.subscription.updated", price="price_test_enterprise"))
    assert response.json()["outcome"] == "plan enterprise"
    assert standing(subscriber) == ("enterprise", "active")
    assert deliver(subscription("customer.subscription.updated", status="past_due",
                                price="price_test_enterprise")).json()["outcome"] == "payment lapsed"


def test_events_of_an_unknown_customer_or_account_are_recorded_and_ignored(make_account, prices):
    assert deliver(invoice("invoice.payment_failed", customer="cus_nobody")).json()["outcome"] == \
        "ignored: unknown customer"
    assert deliver(checkout_completed(account_id=999_999, plan="pro")).json()["outcome"] == "ignored: no such account"
    assert StripeEvent.objects.count() == 2


def test_a_customer_paying_for_one_account_cannot_move_another(subscriber, make_account):
    other = make_account(plan="free")
    response = deliver(checkout_completed(account_id=other.pk, plan="enterprise", customer="cus_test_1"))
    assert response.json()["outcome"] == "ignored: the customer pays for another account"
    assert standing(other) == ("free", "active")


def test_an_event_type_not_handled_is_answered_200_and_ignored(db):
    response = deliver(event("customer.created", {"id": "cus_new", "object": "customer"}))
    assert response.status_code == 200
    assert response.json()["outcome"] == "ignored: not handled"


def _assert_envelope(response, status: int, code: str):
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert error["code"] == code and error["message"] and isinstance(error["details"], dict)
    assert error["request_id"] == response["X-Request-Id"]
    return error


@pytest.mark.parametrize("header", [
    None,
    "",
    "garbage",
    "t=notanumber,v1=abc",
    signature_header("{}"),  # the signature of another payload
    "sign-with:whsec_wrong",
    "signed-10-minutes-ago",
], ids=["absent", "empty", "garbage", "not-a-number", "another-payload", "another-secret", "ten-minutes-old"])
def test_a_webhook_whose_signature_does_not_verify_is_400_in_the_error_envelope(db, make_account, header):
    account = make_account(plan="free")
    body, headers = signed(checkout_completed(account_id=account.pk, plan="pro"))
    if header == "sign-with:whsec_wrong":
        header = signature_header(body, "whsec_wrong")
    elif header == "signed-10-minutes-ago":
        header = signature_header(body, timestamp=int(time.time()) - 600)
    extra = {} if header is None else {"HTTP_STRIPE_SIGNATURE": header}
    response = Client().post(WEBHOOK_PATH, body, content_type="application/json", **extra)
    error = _assert_envelope(response, 400, "invalid_parameter")
    assert error["details"]["parameter"] == "Stripe-Signature"
    assert standing(account) == ("free", "active")
    assert not StripeEvent.objects.exists()


@pytest.mark.parametrize("payload", ["not json", "[1, 2]", '{"type": "invoice.paid"}', "\u00ff\u00fe"])
def test_a_signed_payload_that_is_not_a_stripe_event_is_400(db, payload):
    response = Client().post(WEBHOOK_PATH, payload.encode("latin-1"), content_type="application/json",
                             HTTP_STRIPE_SIGNATURE=signature_header(payload.encode("latin-1").decode("utf-8", "replace")))
    _assert_envelope(response, 400, "invalid_parameter")


def test_other_methods_on_the_webhook_are_405_in_the_error_envelope(db):
    error = _assert_envelope(Client().get(WEBHOOK_PATH), 405, "method_not_allowed")
    assert error["details"]["allowed"] == ["POST"]


def test_without_a_webhook_secret_the_endpoint_takes_no_webhooks(db, settings):
    settings.STRIPE_WEBHOOK_SECRET = ""
    body, headers = signed(event("invoice.paid", {}))
    response = Client().post(WEBHOOK_PATH, body, content_type="application/json",
                             HTTP_STRIPE_SIGNATURE=headers["Stripe-Signature"])
    _assert_envelope(response, 404, "not_found")


@pytest.mark.parametrize("reference", ["9" * 40, "-1", "abc", ""])
def test_a_checkout_naming_no_account_of_ours_is_recorded_and_ignored(db, reference):
    stripe_event = checkout_completed(account_id=0, plan="pro")
    stripe_event["data"]["object"].update(client_reference_id=reference, metadata={})
    response = deliver(stripe_event)
    assert response.status_code == 200 and response.json()["outcome"] == "ignored: no such account"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_same_event_redelivered_while_the_first_delivery_runs_is_applied_once(make_account, prices):
    """Stripe may retry before our first answer reached it: the unique event id makes the
    second delivery wait for the first and then do nothing."""
    import threading

    from django.db import connection

    from billing.services import stripe_event_apply

    account = make_account(plan="free")
    bought = checkout_completed(account_id=account.pk, plan="pro")
    start, results = threading.Barrier(4), []

    def deliver_in_a_thread():
        start.wait()
        try:
            results.append(stripe_event_apply(event=bought))
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver_in_a_thread) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(results) == 4 and sum(result is not None for result in results) == 1
    assert StripeEvent.objects.filter(event_id=bought["id"]).count() == 1
    assert standing(account) == ("pro", "active")
