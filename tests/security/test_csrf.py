"""Every POST form of the web pages refuses a submission without its CSRF token (403).

Forms are found by rendering every page a customer (and a visitor) can see and reading
the <form method="post"> elements out of the HTML; a template with a POST form that none
of these pages renders fails test_every_template_with_a_post_form_is_rendered_here, and
every web route of the URLconf is POSTed to without a token as well, so a new form or a
new csrf_exempt view is covered. tests/accounts/test_web_pages.py checks sign-in and key
creation by hand; this covers them all."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from django.conf import settings
from django.test import Client

from .conftest import PASSWORD
from .test_idor import enumerate_routes

TEMPLATES_DIR = Path(settings.BASE_DIR) / "templates"
POST_FORM = re.compile(r"<form\b[^>]*\bmethod=[\"']?post", re.I)


class _Forms(HTMLParser):
    def __init__(self):
        super().__init__()
        self.forms: list[dict] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form" and (attrs.get("method") or "get").lower() == "post":
            self.forms.append({"action": attrs.get("action") or "", "fields": {}})
        elif tag in ("input", "textarea", "select") and self.forms and attrs.get("name"):
            self.forms[-1]["fields"][attrs["name"]] = attrs.get("value") or "x"


def post_forms(html: str) -> list[dict]:
    parser = _Forms()
    parser.feed(html)
    return parser.forms


def templates_with_post_forms() -> set[str]:
    return {str(path.relative_to(TEMPLATES_DIR)) for path in TEMPLATES_DIR.rglob("*.html")
            if POST_FORM.search(path.read_text())}


def rendered_pages(customer) -> list[tuple[str, str, object]]:
    """(url, html, response) of every page with forms, signed in and out."""
    signed_in = customer.web()
    key = customer.keys[0].api_key
    from accounts.services import api_key_revoke

    api_key_revoke(api_key=customer.keys[1].api_key)  # below the cap: the create form shows
    pages = []
    for url in ("/account/keys/", f"/account/keys/{key.pk}/revoke/", "/account/usage/", "/account/streams/",
                "/account/live/", "/no/such/page/"):
        response = signed_in.get(url)
        pages.append((url, response))
    pages.append(("/signout/", signed_in.get("/signout/")))
    visitor = Client()
    for url in ("/", "/signin/", "/admin/login/", "/signup/", "/signup/resend/", "/password/reset/"):
        pages.append((url, visitor.get(url)))
    reset = visitor.get(_reset_link(customer), follow=True)  # Django moves the token into the session
    pages.append((reset.redirect_chain[-1][0], reset))
    return [(url, response.content.decode(), response) for url, response in pages]


def _reset_link(customer) -> str:
    from django.contrib.auth.tokens import default_token_generator
    from django.utils.encoding import force_bytes
    from django.utils.http import urlsafe_base64_encode

    user = customer.account.users.get()
    return f"/password/reset/{urlsafe_base64_encode(force_bytes(user.pk))}/{default_token_generator.make_token(user)}/"


def test_every_template_with_a_post_form_is_rendered_here(two_customers):
    a, _ = two_customers
    rendered = set()
    for _, html, response in rendered_pages(a):
        if post_forms(html):
            rendered |= {t.name for t in response.templates if t.name}
    missing = templates_with_post_forms() - rendered
    assert templates_with_post_forms(), "no form found: the template scan is broken"
    assert not missing, f"templates with a POST form that no page here renders: {sorted(missing)}"


def test_every_post_form_on_every_page_is_refused_without_its_csrf_token(two_customers):
    a, _ = two_customers
    checked = set()
    for url, html, _ in rendered_pages(a):
        for form in post_forms(html):
            action = form["action"] or url
            fields = {k: v for k, v in form["fields"].items() if k != "csrfmiddlewaretoken"}
            for client in (_strict(a, signed_in=True), _strict(a, signed_in=False)):
                response = client.post(action, fields)
                assert response.status_code == 403, (url, action, response.status_code)
                assert b"CSRF" in response.content
            checked.add(action.split("?")[0])
    assert {"/signin/", "/signout/", "/account/keys/", "/admin/login/", "/signup/", "/signup/resend/",
            "/password/reset/"} <= checked
    assert any(re.fullmatch(r"/password/reset/[\w-]+/set-password/", a) for a in checked)
    assert any(re.fullmatch(r"/account/keys/\d+/revoke/", a) for a in checked)
    assert any(re.fullmatch(r"/account/streams/\d+/unsubscribe/", a) for a in checked)


def test_every_web_route_refuses_a_post_without_a_csrf_token(two_customers):
    """No web view is csrf_exempt: the middleware refuses before any view runs."""
    a, _ = two_customers
    ids = {"key_id": a.keys[0].api_key.pk,
           "subscription_id": next(iter(a.subscriptions.values())).pk, "uidb64": "MQ", "token": "x-y"}
    web_routes = [r for r in enumerate_routes() if not r.startswith(("api/", "v1/", "^"))]
    assert len(web_routes) >= 10
    for route in web_routes:
        url = "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m: str(ids[m.group(1)]), route)
        response = _strict(a, signed_in=True).post(url, {"name": "x", "nonce": "n"})
        assert response.status_code == 403 and b"CSRF" in response.content, (url, response.status_code)


def test_the_api_ignores_session_cookies_so_csrf_cannot_reach_it(two_customers):
    """The API authenticates only by bearer key: a signed-in browser's cookies do nothing."""
    a, _ = two_customers
    client = _strict(a, signed_in=True)
    for method, url in (("post", "/api/v1/streams"), ("delete", "/api/v1/streams/binance/BTC/USDT"),
                        ("post", "/api/v1/streams/binance/BTC/USDT/token"), ("get", "/api/v1/me/usage")):
        response = getattr(client, method)(url)
        assert response.status_code == 401, (method, url, response.status_code)


def _strict(customer, *, signed_in: bool) -> Client:
    client = Client(enforce_csrf_checks=True)
    if signed_in:
        assert client.login(email=customer.email, password=PASSWORD)
    return client

