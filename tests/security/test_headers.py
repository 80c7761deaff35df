"""Security headers on every web page (and every API answer), and in production HSTS,
HTTPS only and cookies that never travel in clear.

`manage.py check --deploy` with the production settings is
tests/accounts/test_commands.py::test_check_deploy_with_production_settings_reports_nothing."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys

import pytest
from django.test import Client

from tests.integration.servers import ROOT
from tests.streaming.sse_harness import OpenStream

from .test_idor import enumerate_routes

PAGE_HEADERS = {
    "X-Content-Type-Options": {"nosniff"},
    "Referrer-Policy": {"same-origin", "no-referrer", "strict-origin", "strict-origin-when-cross-origin"},
    "Cross-Origin-Opener-Policy": {"same-origin"},
}


def assert_page_headers(response, label: str) -> None:
    for name, allowed in PAGE_HEADERS.items():
        assert response.get(name) in allowed, f"{label}: {name} is {response.get(name)!r}"
    csp = response.get("Content-Security-Policy", "")
    assert response.get("X-Frame-Options") == "DENY" or "frame-ancestors 'none'" in csp, \
        f"{label}: the page can be framed"


def web_urls(customer) -> list[str]:
    ids = {"key_id": customer.keys[0].api_key.pk, "subscription_id": next(iter(customer.subscriptions.values())).pk,
           "uidb64": "MQ", "token": "x-y"}
    routes = [r for r in enumerate_routes() if not r.startswith(("api/", "v1/", "^"))]
    urls = ["/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m: str(ids[m.group(1)]), r) for r in routes]
    return urls + ["/admin/login/", "/admin/accounts/apikey/", "/api/v1/docs", "/no/such/page/"]


def test_every_web_page_sends_the_security_headers_signed_in_and_out(two_customers):
    a, _ = two_customers
    urls = web_urls(a)
    assert "/account/keys/" in urls and "/account/live/" in urls
    for client, who in ((a.web(), "signed in"), (Client(), "visitor")):
        for url in urls:
            for method in ("get", "post"):
                response = getattr(client, method)(url)
                assert_page_headers(response, f"{who} {method.upper()} {url} ({response.status_code})")


def test_every_api_answer_and_static_file_sends_nosniff(two_customers, client_for):
    a, _ = two_customers
    api = client_for(a.key)
    for response in (api.get("/api/v1/me/usage"), api.get("/api/v1/streams/x/y/z/status"),
                     Client().get("/api/v1/streams"), api.get("/api/v1/schema"), Client().get("/healthz")):
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["X-Frame-Options"] == "DENY"
    static = Client().get("/static/css/app.css")
    assert static.status_code == 200 and static["X-Content-Type-Options"] == "nosniff"


@pytest.mark.django_db(transaction=True)
def test_the_live_feed_sends_nosniff_on_refusals_and_streams(two_customers):
    a, _ = two_customers

    async def go():
        refused = await OpenStream("/api/v1/streams/binance/BTC/USDT/events", {}).start().until(
            lambda s: s.finished)
        opened = OpenStream("/api/v1/streams/binance/BTC/USDT/events",
                            {"Authorization": f"Bearer {a.key}"}).start()
        await opened.until(lambda s: s.status is not None)
        await opened.close()
        return refused, opened

    refused, opened = asyncio.run(go())
    assert refused.status == 401 and opened.status == 200
    for stream in (refused, opened):
        assert stream.headers["x-content-type-options"] == "nosniff"


PRODUCTION_PROBE = r"""
import json, django
django.setup()
from django.conf import settings
from django.test import Client, override_settings
client = Client(HTTP_HOST="api.example.com")
# static files are collected at deploy time; the probe needs no manifest
with override_settings(STORAGES={**settings.STORAGES, "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}):
    plain = client.get("/signin/")
    tls = client.get("/signin/", secure=True)
print(json.dumps({
    "plain_status": plain.status_code, "plain_location": plain.get("Location"),
    "tls_status": tls.status_code, "tls_headers": dict(tls.items()),
    "csrf_cookie": tls.cookies["csrftoken"].output() if "csrftoken" in tls.cookies else "",
    "settings": {name: getattr(settings, name) for name in (
        "DEBUG", "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS", "SECURE_HSTS_INCLUDE_SUBDOMAINS",
        "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SESSION_COOKIE_HTTPONLY", "CSRF_COOKIE_HTTPONLY",
        "X_FRAME_OPTIONS", "SECURE_CONTENT_TYPE_NOSNIFF")},
}))
"""


def test_production_sends_hsts_redirects_to_https_and_secures_its_cookies():
    env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "REDIS_URL")}
    env.update({"DJANGO_SETTINGS_MODULE": "config.settings.production",
                "SECRET_KEY": "p" * 20 + "-production-secret-0123456789abcdefghijklmnop",
                "ALLOWED_HOSTS": "api.example.com"})
    result = subprocess.run([sys.executable, "-c", PRODUCTION_PROBE], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    probe = json.loads(result.stdout.strip().splitlines()[-1])
    settings = probe["settings"]
    assert settings["DEBUG"] is False
    assert settings["SECURE_SSL_REDIRECT"] and settings["SECURE_HSTS_SECONDS"] >= 31_536_000
    assert settings["SECURE_HSTS_INCLUDE_SUBDOMAINS"]
    assert settings["SESSION_COOKIE_SECURE"] and settings["CSRF_COOKIE_SECURE"]
    assert settings["SESSION_COOKIE_HTTPONLY"]
    assert probe["plain_status"] == 301 and probe["plain_location"].startswith("https://api.example.com/")
    headers = probe["tls_headers"]
    assert probe["tls_status"] == 200
    assert headers["Strict-Transport-Security"].startswith("max-age=31536000")
    assert "includeSubDomains" in headers["Strict-Transport-Security"]
    for name, allowed in PAGE_HEADERS.items():
        assert headers.get(name) in allowed, name
    assert headers["X-Frame-Options"] == "DENY"
    cookie = probe["csrf_cookie"]
    assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Lax" in cookie
