"""config/loop.py: what an answer on the event loop serves itself and what it leaves to
Django (the views stay the one definition of every other case)."""

import asyncio

import pytest
from django.http import HttpResponse
from django.test import RequestFactory

from config import loop

factory = RequestFactory()


@pytest.mark.parametrize(("query", "accept", "expected"), [
    ("", None, "json"),
    ("?format=toon", None, "toon"),
    ("?format=json", None, "json"),
    ("", "application/toon", "toon"),
    ("?format=json", "application/toon", "toon"),  # Accept wins, as in every view
    ("", "*/*", "json"),
])
def test_a_plain_request_gets_the_format_every_view_would_choose(query, accept, expected):
    headers = {"HTTP_ACCEPT": accept} if accept else {}
    assert loop.plain_format(factory.get(f"/api/v1/me/usage{query}", **headers)) == expected


@pytest.mark.parametrize(("query", "accept"), [
    ("?format=xml", None),  # the view's 400
    ("?x=1", None),  # the view's 400 naming the unknown parameter
    ("?format=json&format=toon", None),
    ("?format=json&x=1", None),
    ("", "text/html"),  # the view's 415
])
def test_anything_the_view_must_check_is_left_to_it(query, accept):
    headers = {"HTTP_ACCEPT": accept} if accept else {}
    assert loop.plain_format(factory.get(f"/api/v1/me/usage{query}", **headers)) is None


def test_after_the_database_fails_django_answers_for_a_second_and_other_failures_only_decline(monkeypatch):
    """A database out of reach leaves every request to Django for a second, so none waits
    out the loop's pool first; anything else (a client's odd request) declines that request
    alone."""
    from django.db import OperationalError

    clock = [1000.0]
    monkeypatch.setattr("config.loop.time.monotonic", lambda: clock[0])
    monkeypatch.setattr(loop, "_declining_until", 0.0)

    async def database_down(request):
        raise OperationalError("the database went away")

    async def odd_request(request):
        raise ValueError("too many fields")

    async def served(request):
        return HttpResponse(b"{}")

    get = factory.get("/api/v1/me/usage")
    assert asyncio.run(loop.answer(served, get)).content == b"{}"
    assert asyncio.run(loop.answer(odd_request, get)) is None
    assert asyncio.run(loop.answer(served, get)).content == b"{}"
    assert asyncio.run(loop.answer(database_down, get)) is None
    clock[0] += loop.DECLINE_AFTER_FAILURE_SECONDS - 0.01
    assert asyncio.run(loop.answer(served, get)) is None
    clock[0] += 0.02
    assert asyncio.run(loop.answer(served, get)).content == b"{}"


@pytest.fixture
def site_middleware_rebuilt():
    """The site middleware built again from the settings of the test, and after it."""
    loop.site_middleware.cache_clear()
    yield
    loop.site_middleware.cache_clear()


def test_the_site_middleware_shapes_a_loop_answer_as_it_shapes_a_view_answer(settings, site_middleware_rebuilt):
    request = factory.get("/api/v1/me/usage", HTTP_X_REQUEST_ID="abc-123")
    loop.assign_request_id(request)
    response = loop.site_response(request, HttpResponse(b'{"a":1}', content_type="application/json"))
    assert response["X-Request-Id"] == "abc-123"
    assert response["Content-Length"] == "7"
    assert response["X-Frame-Options"] == settings.X_FRAME_OPTIONS
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == settings.SECURE_REFERRER_POLICY


def test_a_host_django_would_refuse_or_a_redirect_to_https_is_left_to_django(settings, site_middleware_rebuilt):
    assert loop.site_allows(factory.get("/api/v1/me/usage"))
    assert not loop.site_allows(factory.get("/api/v1/me/usage", HTTP_HOST="evil.example"))
    settings.SECURE_SSL_REDIRECT = True
    loop.site_middleware.cache_clear()
    assert not loop.site_allows(factory.get("/api/v1/me/usage"))
    assert loop.site_allows(factory.get("/api/v1/me/usage", secure=True))


def test_the_loops_pool_is_opened_once_by_concurrent_first_statements_and_again_after_a_failure(monkeypatch):
    from config import db

    openings = []

    async def opening():
        openings.append(1)
        await asyncio.sleep(0.01)
        if len(openings) == 1:
            raise ConnectionError("the database is not up yet")
        return "pool"

    monkeypatch.setattr(db, "_open_loop_pool", opening)
    monkeypatch.setattr(db, "_loop_pools", {})

    async def first_statements():
        first = await asyncio.gather(*(db._loop_pool() for _ in range(5)), return_exceptions=True)
        again = await asyncio.gather(*(db._loop_pool() for _ in range(5)))
        return first, again

    first, again = asyncio.run(first_statements())
    assert all(isinstance(result, ConnectionError) for result in first)
    assert again == ["pool"] * 5
    assert len(openings) == 2


def test_every_loop_route_is_held_to_its_view_by_a_test_on_running_servers():
    """A route answered on the event loop has a module that compares its answers with its
    view's, byte for byte, on two running servers (the loop on and off): each such module
    names the routes it covers in LOOP_ROUTES_PROVEN."""
    import importlib
    import re
    from pathlib import Path

    from config.urls import LOOP_ROUTES

    tests = Path(__file__).resolve().parents[1]
    proven = set()
    for path in tests.rglob("test_*.py"):
        if re.search(r"^LOOP_ROUTES_PROVEN = ", path.read_text(), re.MULTILINE):
            module = importlib.import_module(".".join(path.relative_to(tests.parent).with_suffix("").parts))
            proven |= set(module.LOOP_ROUTES_PROVEN)
    assert set(LOOP_ROUTES) - proven == set()


def test_a_loop_route_reads_its_views_method_input_permissions_formats_and_counting():
    from billing.api import UsageView
    from config.urls import LOOP_ROUTES
    from market.api import CandlestickView

    series, usage = LOOP_ROUTES["/api/v1/market/candlestick"], LOOP_ROUTES["/api/v1/me/usage"]
    assert (series.method, series.input, series.metered) == ("POST", CandlestickView.inputs["POST"], True)
    assert (usage.method, usage.input, usage.metered) == ("GET", None, False)
    assert [type(p) for p in series.permissions] == [type(p) for p in CandlestickView().get_permissions()]
    assert [type(p) for p in usage.permissions] == [type(p) for p in UsageView().get_permissions()]
    assert series.formats == usage.formats == {"json", "toon"}
    assert series.allow == "POST, OPTIONS" and usage.allow == "GET, HEAD, OPTIONS"


def test_a_view_counted_before_it_answers_cannot_be_a_loop_route():
    from django.core.exceptions import ImproperlyConfigured

    from config.api.views import AccountAPIView

    class CountedFirst(AccountAPIView):
        def get(self, request):
            return None

    with pytest.raises(ImproperlyConfigured, match="counts before it answers"):
        loop.LoopRoute(CountedFirst, lambda call: None)


def test_a_count_that_never_got_a_connection_is_told_apart_from_one_that_may_have_counted():
    """The loop's count step hands a request to its view only when the statement never
    left the process (the loop's pool had no connection in time): the view then counts it
    once. A failure after sending may have counted it: that request is refused unrecorded."""
    from django.db import OperationalError
    from psycopg_pool import PoolTimeout

    from config.db import statement_not_sent

    def raised(exc, cause=None):
        try:
            raise exc from cause
        except Exception as caught:  # noqa: BLE001 - the test keeps what was raised
            return caught

    assert statement_not_sent(PoolTimeout("couldn't get a connection after 1.00 sec"))
    assert statement_not_sent(raised(OperationalError("wrapped"), PoolTimeout("no connection")))
    assert not statement_not_sent(OperationalError("server closed the connection unexpectedly"))
    assert not statement_not_sent(raised(OperationalError("wrapped"), ValueError("after sending")))
