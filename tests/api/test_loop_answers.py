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
