"""The plaintext of an API key exists only in the response that created it: never in the
database, the cache, the logs, stdout/stderr, or any error body or page.

tests/accounts/test_api_keys.py proves that creating a key stores only its argon2id hash;
here a whole life of a key (created on the web page, used on every kind of endpoint and
on the live feed, mistyped, forged, put in query strings, hitting 500s, revoked, used
after revocation) runs with every logger at DEBUG and SQL logging on, and then every
trace it could have left is searched."""

from __future__ import annotations

import asyncio
import logging
import re
from contextlib import contextmanager

import pytest
from django.conf import settings
from django.contrib.sessions.models import Session
from django.core.cache import cache
from django.db import connection
from django.test import Client

from accounts import keys
from accounts.models import ApiKey
from accounts.services import api_key_create, api_key_revoke
from tests.accounts.test_api_keys import _every_text_value_in_the_database
from tests.accounts.test_web_pages import _nonce
from tests.streaming.sse_harness import OpenStream

from .conftest import KEY_PATTERN, PASSWORD, seed_recent_bars

PAIR = "/api/v1/streams/binance/BTC/USDT"
QUERY_NAMES = ("api_key", "key", "token", "access_token", "format", "exchange")


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(self.format(record))
        self.lines.append(repr(record.args))


@contextmanager
def everything_logged():
    """Every logger at DEBUG into one list, SQL statements with their parameters included."""
    collect = _Collect()
    loggers = [logging.getLogger()] + [logger for logger in logging.Logger.manager.loggerDict.values()
                                       if isinstance(logger, logging.Logger)]
    saved = [(logger, logger.level, logger.disabled) for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
        logger.disabled = False
        if logger is loggers[0] or not logger.propagate:
            logger.addHandler(collect)
    connection.force_debug_cursor = True
    try:
        yield collect.lines
    finally:
        connection.force_debug_cursor = False
        for logger, level, disabled in saved:
            logger.setLevel(level)
            logger.disabled = disabled
            logger.removeHandler(collect)


def secret_parts(plaintext: str) -> list[str]:
    """The key and its secret (the 32 characters after the lookup id): neither may appear."""
    return [plaintext, plaintext[21:53]]


def cached_values() -> list[bytes]:
    if settings.REDIS_URL:
        import redis

        client = redis.Redis.from_url(settings.REDIS_URL)
        return [client.dump(name) or b"" for name in client.scan_iter(count=1000)]
    return [value if isinstance(value, bytes) else repr(value).encode() for value in cache._cache.values()]


def assert_nowhere(plaintexts: list[str], *, logs: list[str], output: str) -> None:
    texts = list(_every_text_value_in_the_database())
    for session in Session.objects.all():
        texts.append(repr(session.get_decoded()))
    blobs = cached_values()
    for plaintext in plaintexts:
        for part in secret_parts(plaintext):
            assert not any(part in text for text in texts), "key in the database"
            assert not any(part.encode() in blob for blob in blobs), "key in the cache"
            assert not any(part in line for line in logs), "key in a log record"
            assert part not in output, "key on stdout/stderr"


def provoke_500(monkeypatch):
    def explode(*args, **kwargs):
        raise RuntimeError("usage store exploded")

    monkeypatch.setattr("billing.usage.read_usage", explode)
    monkeypatch.setattr("billing.views.usage_month", explode)


@pytest.mark.django_db(transaction=True)
def test_a_keys_whole_life_leaves_its_plaintext_in_no_table_cache_log_or_output(
        two_customers, catalog, capfd, monkeypatch):
    a, _ = two_customers
    seed_recent_bars(catalog["binance/BTC/USDT"], hours=1)
    capfd.readouterr()
    with everything_logged() as logs:
        web = Client()
        assert web.post("/signin/", {"username": a.email, "password": PASSWORD}).status_code == 302
        # a.keys hold the cap: revoke one on the web page, then create a new one there
        assert web.post(f"/account/keys/{a.keys[1].api_key.pk}/revoke/").status_code == 302
        page = web.get("/account/keys/").content.decode()
        created = web.post("/account/keys/", {"name": "life", "nonce": _nonce(page)})
        plaintext = KEY_PATTERN.search(created.content.decode()).group(0)
        lookup = plaintext[9:21]
        assert ApiKey.objects.filter(lookup_id=lookup, revoked_at__isnull=True).exists()

        api = Client(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
        for _ in range(2):  # cold (argon2) then warm (cache) path
            assert api.get("/api/v1/me/usage").status_code == 200
        assert api.post("/api/v1/streams", {"exchange": "binance", "base": "BTC", "quote": "USDT"},
                        content_type="application/json").status_code in (200, 201)
        assert api.get(f"{PAIR}/status").status_code == 200
        assert api.get(f"{PAIR}/live").status_code == 200
        assert api.post(f"{PAIR}/snapshot", {"metrics": ["trade"], "granularity": "minute"},
                        content_type="application/json").status_code == 200
        assert api.get(f"{PAIR}/schemes").status_code == 200
        assert api.get("/api/v1/rank/top?exchange=binance").status_code == 200
        assert api.post("/api/v1/market/candlestick", {"exchange": "binance", "symbol": "BTC-USDT",
                                                       "start": "2024-01-01", "end": "2024-01-02"},
                        content_type="application/json").status_code == 200
        token = api.post(f"{PAIR}/token").json()["token"]
        assert plaintext not in token

        async def sse():
            opened = OpenStream(f"{PAIR}/events", {"Authorization": f"Bearer {plaintext}"}).start()
            await opened.until(lambda s: any(e["event"] == "status" for e in s.events))
            await opened.close()
            by_token = OpenStream(f"{PAIR}/events", {}, f"token={token}").start()
            await by_token.until(lambda s: s.status is not None)
            await by_token.close()
            refused = await OpenStream(f"{PAIR}/events", {}, f"api_key={plaintext}").start().until(
                lambda s: s.finished)
            assert refused.status == 401
        asyncio.run(sse())

        # mistakes: the key in query strings, a typo, a forged secret, the wrong scheme
        for name in QUERY_NAMES:
            assert Client().get(f"/api/v1/me/usage?{name}={plaintext}").status_code in (400, 401)
        typo = plaintext[:-1] + ("A" if plaintext[-1] != "A" else "B")
        payload = lookup + "f" * 32
        forged = f"mdp_live_{payload}{keys.checksum(payload)}"
        for header in (f"Bearer {typo}", f"Bearer {forged}", f"Basic {plaintext}", plaintext, f"Token {plaintext}"):
            assert Client(HTTP_AUTHORIZATION=header).get("/api/v1/me/usage").status_code == 401
        # 500s, on the API and on a web page, with the key in the header and the query string
        provoke_500(monkeypatch)
        api.raise_request_exception = False
        assert api.get("/api/v1/me/usage").status_code == 500
        assert api.get(f"/api/v1/me/usage?api_key={plaintext}").status_code == 400  # an unknown query field
        web.raise_request_exception = False
        assert web.get(f"/account/usage/?api_key={plaintext}").status_code == 500
        monkeypatch.undo()
        # revoked on the web page: refused at once, and that refusal leaves nothing either
        key_id = ApiKey.objects.get(lookup_id=lookup).pk
        assert web.post(f"/account/keys/{key_id}/revoke/").status_code == 302
        assert api.get("/api/v1/me/usage").status_code == 401

    captured = capfd.readouterr()
    assert any("Unhandled error" in line or "Internal Server Error" in line for line in logs)
    assert any("SELECT" in line for line in logs), "SQL was not logged: the search would prove nothing"
    assert_nowhere([plaintext, a.key], logs=logs, output=captured.out + captured.err)


@pytest.fixture
def revoked(two_customers):
    a, _ = two_customers
    api_key_revoke(api_key=a.keys[1].api_key, via="command")
    return a.keys[1].plaintext


@pytest.fixture
def free_key(make_account):
    return api_key_create(account=make_account(plan="free"), name="free").plaintext


def _error_cases(a_key, revoked_key, free_key):
    """(label, key, method, url, expected status) on the API and on the web pages."""
    return [
        ("401 revoked", revoked_key, "get", "/api/v1/me/usage", 401),
        ("401 revoked stream op", revoked_key, "post", f"{PAIR}/snapshot", 401),
        ("403 free plan", free_key, "post", "/api/v1/market/candlestick", 403),
        ("403 free plan streams", free_key, "get", "/api/v1/streams", 403),
        ("404 unknown api path", a_key, "get", "/api/v1/no/such/thing", 404),
        ("404 unknown v1 path", a_key, "get", "/v1/nothing", 404),
        ("404 unknown pair", a_key, "get", "/api/v1/streams/binance/NOPE/USDT/status", 404),
        ("405 wrong method", a_key, "put", "/api/v1/me/usage", 405),
        ("400 invalid json", a_key, "post", "/api/v1/streams", 400),
        ("500 api", a_key, "get", "/api/v1/me/usage", 500),
        ("404 web page", a_key, "get", "/no/such/page/", 404),
        ("500 web page", None, "get", "/account/usage/", 500),
    ]


@pytest.mark.parametrize("where", ["authorization header", "query string"])
def test_error_bodies_and_pages_never_contain_the_key(two_customers, revoked, free_key, monkeypatch, where):
    a, _ = two_customers
    provoke_500(monkeypatch)
    signed_in = a.web()
    signed_in.raise_request_exception = False
    seen = 0
    for label, key, method, url, status in _error_cases(a.key, revoked, free_key):
        shown = key or a.key
        if label == "500 web page":
            client = signed_in
        elif where == "authorization header":
            client = Client(HTTP_AUTHORIZATION=f"Bearer {shown}")
        else:
            client = Client(HTTP_AUTHORIZATION=f"Bearer {key}" if key and "401" not in label else "")
        client.raise_request_exception = False
        target = url if where == "authorization header" else (
            url + ("&" if "?" in url else "?") + "&".join(f"{n}={shown}" for n in ("api_key", "key", "token")))
        extra = {"data": b"{not json", "content_type": "application/json"} if label == "400 invalid json" else {}
        response = getattr(client, method)(target, **extra)
        if where == "query string" and label in ("404 unknown pair", "500 api"):
            status = 400  # an API endpoint refuses the unknown query fields first, naming them (not their values)
        if where == "authorization header" or status in (400, 404, 405, 500):
            assert response.status_code == status, (label, response.status_code, response.content[:200])
        body = response.content.decode("utf-8", "replace")
        headers = "\n".join(f"{k}: {v}" for k, v in response.items())
        for part in secret_parts(shown):
            assert part not in body, f"{label}: key in the body"
            assert part not in headers, f"{label}: key in a header"
        seen += 1
    assert seen == len(_error_cases(a.key, revoked, free_key))


def test_the_page_that_shows_a_new_key_is_never_cached_or_framed(two_customers):
    a, _ = two_customers
    web = a.web()
    api_key_revoke(api_key=a.keys[1].api_key, via="command")
    page = web.get("/account/keys/").content.decode()
    created = web.post("/account/keys/", {"name": "cache", "nonce": _nonce(page)})
    assert KEY_PATTERN.search(created.content.decode())
    cache_control = created["Cache-Control"]
    assert "no-store" in cache_control and "private" in cache_control
    assert created["X-Frame-Options"] == "DENY"
    assert created["Referrer-Policy"] in ("same-origin", "no-referrer", "strict-origin")


def test_the_exception_reporter_hides_the_authorization_header(rf, two_customers):
    """What an admin error e-mail or a DEBUG page would show of a failing request."""
    from django.views.debug import ExceptionReporter

    a, _ = two_customers
    request = rf.get("/api/v1/me/usage", HTTP_AUTHORIZATION=f"Bearer {a.key}")
    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        text = ExceptionReporter(request, type(exc), exc, exc.__traceback__).get_traceback_text()
    assert "HTTP_AUTHORIZATION" in text
    for part in secret_parts(a.key):
        assert part not in text
    assert not re.search(r"mdp_live_[0-9A-Za-z]{50}", text)
