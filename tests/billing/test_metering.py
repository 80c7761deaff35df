"""Exact monthly counts, X-Quota headers, 429, and what is not counted."""

from datetime import datetime, timezone

import pytest
from django.urls import path
from rest_framework.response import Response

from config.api.views import AccountAPIView
from billing.models import UsageCounter
from billing.permissions import HasStreamingAccess
from config import clock
from config.api import params
from config.api.errors import InvalidParameter
from config.urls import urlpatterns as root_urlpatterns


class CountedSeriesQuery(params.RequestSerializer):
    bad = params.Text(max_length=10, required=False)
    rows = params.Integer(min_value=0, max_value=5000, required=False)


class CountedSeries(AccountAPIView):
    inputs = {"GET": CountedSeriesQuery}

    def get(self, request):
        if "bad" in request.query_params:
            raise InvalidParameter("bad", "is bad")
        rows = int(request.query_params.get("rows", 3))
        return Response({"data": [{"n": i, "price": 100.5 + i} for i in range(rows)]})


class CountedWhenServed(CountedSeries):
    counted_when_served = True


class CountedStreaming(AccountAPIView):
    permission_classes = [HasStreamingAccess]

    def get(self, request):
        return Response({"ok": True})


urlpatterns = [
    path("api/v1/test/counted", CountedSeries.as_view()),
    path("api/v1/test/counted-when-served", CountedWhenServed.as_view()),
    path("api/v1/test/streaming", CountedStreaming.as_view()),
    *root_urlpatterns,
]
handler404 = "config.api.views.handler404"
pytestmark = pytest.mark.urls(__name__)

USAGE = "/api/v1/me/usage"


@pytest.fixture(params=["/api/v1/test/counted", "/api/v1/test/counted-when-served"],
                ids=["counted-before", "counted-when-served"])
def counted(request):
    """A counted endpoint of each kind: counted before its view, or when its answer leaves."""
    return request.param


def month_row(account):
    return UsageCounter.objects.filter(account=account, period="month").first()


def test_a_counted_request_adds_one_request_and_its_exact_body_length(api, account, counted):
    response = api.get(counted)
    row = month_row(account)
    assert (row.requests, row.bytes) == (1, len(response.content))


def test_toon_bodies_count_their_own_smaller_length(api, account, counted):
    as_json = api.get(f"{counted}?rows=50")
    as_toon = api.get(f"{counted}?rows=50", HTTP_ACCEPT="application/toon")
    assert len(as_toon.content) < len(as_json.content)
    assert month_row(account).bytes == len(as_json.content) + len(as_toon.content)


def test_headers_carry_the_counts_after_this_response(api, account, counted):
    first = api.get(counted)
    second = api.get(f"{counted}?rows=7")
    plan = account.plan
    assert second["X-Quota-Requests-Used"] == "2"
    assert second["X-Quota-Bytes-Used"] == str(len(first.content) + len(second.content))
    assert second["X-Quota-Requests-Limit"] == str(plan.monthly_requests)
    assert second["X-Quota-Requests-Remaining"] == str(plan.monthly_requests - 2)
    assert second["X-Quota-Bytes-Remaining"] == str(plan.monthly_bytes - int(second["X-Quota-Bytes-Used"]))
    assert int(second["X-Quota-Reset"]) > datetime.now(timezone.utc).timestamp()


def test_header_values_match_usage(api):
    last = None
    for rows in (1, 5, 9):
        last = api.get(f"/api/v1/test/counted?rows={rows}")
    usage = api.get(USAGE)
    body = usage.json()
    assert str(body["requests"]["used"]) == last["X-Quota-Requests-Used"] == usage["X-Quota-Requests-Used"]
    assert str(body["bytes"]["used"]) == last["X-Quota-Bytes-Used"] == usage["X-Quota-Bytes-Used"]
    assert str(body["requests"]["remaining"]) == last["X-Quota-Requests-Remaining"]


def test_a_400_on_a_counted_endpoint_counts(api, account, counted):
    response = api.get(f"{counted}?bad=1")
    assert response.status_code == 400
    assert response["X-Quota-Requests-Used"] == "1"
    assert month_row(account).bytes == len(response.content)


def test_an_unknown_format_on_a_counted_endpoint_counts(api, account, counted):
    response = api.get(f"{counted}?format=xml")
    assert response.status_code == 400
    assert month_row(account).requests == 1


def test_a_missing_key_or_plan_wins_over_an_unknown_format_and_is_not_counted(make_account, client_for, client):
    from accounts.services import api_key_create

    free = client_for(api_key_create(account=make_account(plan="free"), name="k").plaintext)
    assert free.get("/api/v1/test/counted?format=xml").status_code == 403
    assert client.get("/api/v1/test/counted?format=xml").status_code == 401
    assert UsageCounter.objects.count() == 0


def test_usage_is_not_counted(api, account):
    for _ in range(3):
        assert api.get(USAGE).status_code == 200
    assert month_row(account) is None
    assert api.get(USAGE)["X-Quota-Requests-Used"] == "0"


def test_unauthenticated_and_forbidden_requests_are_not_counted(make_account, client_for, client):
    from accounts.services import api_key_create

    free = make_account(plan="free")
    key = api_key_create(account=free, name="k").plaintext
    forbidden = client_for(key).get("/api/v1/test/counted")
    assert forbidden.status_code == 403
    assert forbidden["X-Quota-Requests-Used"] == "0"
    assert client.get("/api/v1/test/counted").status_code == 401
    assert UsageCounter.objects.count() == 0


def test_unauthenticated_responses_carry_no_quota_headers(client, db):
    response = client.get("/api/v1/test/counted")
    assert "X-Quota-Requests-Used" not in response


def test_the_response_that_crosses_the_budget_is_served_and_the_next_is_429(api, account, counted):
    account.plan.monthly_requests = 2
    account.plan.save()
    assert api.get(counted).status_code == 200
    crossing = api.get(counted)
    assert crossing.status_code == 200 and crossing["X-Quota-Requests-Remaining"] == "0"
    refused = api.get(counted)
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == "quota_exceeded"
    assert error["details"]["resets_at"].endswith("T00:00:00Z")
    assert int(refused["Retry-After"]) > 0
    assert refused["X-Quota-Requests-Used"] == "2"
    assert month_row(account).requests == 2


def test_the_byte_budget_also_refuses(api, account, counted):
    account.plan.monthly_bytes = 10
    account.plan.save()
    assert api.get(counted).status_code == 200
    refused = api.get(counted)
    assert refused.status_code == 429
    assert refused.json()["error"]["details"]["exhausted"] == "bytes"


def test_usage_keeps_answering_when_the_quota_is_used_up(api, account, counted):
    account.plan.monthly_requests = 1
    account.plan.save()
    api.get(counted)
    assert api.get(counted).status_code == 429
    usage = api.get(USAGE)
    assert usage.status_code == 200 and usage.json()["requests"]["remaining"] == 0


def test_a_raised_plan_quota_takes_effect_on_the_next_request(api, account, counted):
    account.plan.monthly_requests = 1
    account.plan.save()
    api.get(counted)
    assert api.get(counted).status_code == 429
    account.plan.monthly_requests = 5
    account.plan.save()
    assert api.get(counted).status_code == 200


def test_retry_after_and_resets_at_name_the_next_utc_month(api, account, monkeypatch, counted):
    monkeypatch.setattr(clock, "utcnow", lambda: datetime(2026, 12, 31, 23, 59, 0, tzinfo=timezone.utc))
    account.plan.monthly_requests = 1
    account.plan.save()
    api.get(counted)
    refused = api.get(counted)
    assert refused.json()["error"]["details"]["resets_at"] == "2027-01-01T00:00:00Z"
    assert refused["Retry-After"] == "60"
    assert refused["X-Quota-Reset"] == str(int(datetime(2027, 1, 1, tzinfo=timezone.utc).timestamp()))


def test_month_rollover_resets_the_counters(api, account, monkeypatch, counted):
    monkeypatch.setattr(clock, "utcnow", lambda: datetime(2026, 11, 30, 23, 59, 59, tzinfo=timezone.utc))
    account.plan.monthly_requests = 2
    account.plan.save()
    api.get(counted)
    api.get(counted)
    assert api.get(counted).status_code == 429
    monkeypatch.setattr(clock, "utcnow", lambda: datetime(2026, 12, 1, 0, 0, 0, tzinfo=timezone.utc))
    fresh = api.get(counted)
    assert fresh.status_code == 200 and fresh["X-Quota-Requests-Used"] == "1"
    usage = api.get(USAGE).json()
    assert usage["period"] == {"start": "2026-12-01T00:00:00Z", "end": "2027-01-01T00:00:00Z"}
    assert usage["requests"]["used"] == 1


def test_days_are_recorded_for_the_chart(api, account, monkeypatch, counted):
    for day in (3, 3, 4):
        monkeypatch.setattr(clock, "utcnow", lambda d=day: datetime(2026, 11, d, 12, tzinfo=timezone.utc))
        api.get(counted)
    from billing.selectors import usage_month

    usage = usage_month(account_id=account.pk, now=datetime(2026, 11, 20, tzinfo=timezone.utc))
    per_day = {d.day: (r, b) for d, r, b in usage.days}
    assert len(usage.days) == 30
    assert per_day[3][0] == 2 and per_day[4][0] == 1 and per_day[5] == (0, 0)
    assert sum(b for _, _, b in usage.days) == usage.bytes


@pytest.mark.parametrize("route, write", [("/api/v1/test/counted", "add_bytes"),
                                          ("/api/v1/test/counted-when-served", "count_served")])
def test_a_failing_usage_write_fails_the_request(api, monkeypatch, route, write):
    from billing import metering

    def broken(ticket, size):
        raise RuntimeError("database gone")

    monkeypatch.setattr(metering, write, broken)
    response = api.get(route)
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "internal_error"
    assert "data" not in response.json()


def test_the_refusal_of_an_unrecorded_request_speaks_the_format_asked_for(api, monkeypatch):
    from billing import metering

    def broken(ticket, size):
        raise RuntimeError("database gone")

    monkeypatch.setattr(metering, "add_bytes", broken)
    response = api.get("/api/v1/test/counted", HTTP_ACCEPT="application/toon")
    assert response.status_code == 500
    assert response["Content-Type"].startswith("application/toon")
    assert response.content.decode().startswith("error:\n  code: internal_error")


def test_a_failing_count_fails_the_request_before_the_view(api, monkeypatch):
    from billing import metering

    def broken(ticket):
        raise RuntimeError("database gone")

    monkeypatch.setattr(metering, "count_request", broken)
    response = api.get("/api/v1/test/counted")
    assert response.status_code == 500
    assert "data" not in response.json()


def test_one_account_never_sees_anothers_usage(api, make_account, client_for):
    from accounts.services import api_key_create

    api.get("/api/v1/test/counted")
    other = client_for(api_key_create(account=make_account(), name="k").plaintext)
    assert other.get(USAGE).json()["requests"]["used"] == 0


def test_an_answer_the_month_can_no_longer_pay_for_is_replaced_by_a_429_in_its_format(api, account, monkeypatch):
    """Counted when served: another request took the month's last request while this one
    was in its view; the answer is not served and not counted."""
    account.plan.monthly_requests = 1
    account.plan.save()
    view = CountedWhenServed.get

    def meanwhile_the_budget_goes(self, request):
        UsageCounter.objects.create(account=account, period="month",
                                    period_start=clock.utcnow().date().replace(day=1), requests=1, bytes=0)
        return view(self, request)

    monkeypatch.setattr(CountedWhenServed, "get", meanwhile_the_budget_goes)
    refused = api.get("/api/v1/test/counted-when-served", HTTP_ACCEPT="application/toon")
    assert refused.status_code == 429
    assert refused["Content-Type"].startswith("application/toon")
    assert refused.content.decode().startswith("error:\n  code: quota_exceeded")
    assert int(refused["Retry-After"]) > 0 and refused["X-Quota-Requests-Used"] == "1"
    assert (month_row(account).requests, month_row(account).bytes) == (1, 0)
    assert not UsageCounter.objects.filter(account=account, period="day").exists()


def test_a_month_found_used_up_refuses_before_the_view_for_a_moment(api, account, settings, monkeypatch):
    """Counted when served: once this process saw the month used up, the next requests are
    refused before their view runs, for as long as a plan edit takes to arrive."""
    settings.ACCOUNT_CACHE_SECONDS = 60
    account.plan.monthly_requests = 1
    account.plan.save()
    assert api.get("/api/v1/test/counted-when-served").status_code == 200
    assert api.get("/api/v1/test/counted-when-served").status_code == 429
    ran = []
    monkeypatch.setattr(CountedWhenServed, "get", lambda self, request: ran.append(1))
    refused = api.get("/api/v1/test/counted-when-served")
    assert refused.status_code == 429 and refused["X-Quota-Requests-Used"] == "1"
    assert ran == []
