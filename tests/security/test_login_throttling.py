"""Sign-in is throttled per address and email (docs/ACCOUNTS.md). The basic case (refused
after LOGIN_FAILURE_LIMIT failures, even with the right password) is
tests/accounts/test_web_pages.py::test_sign_in_is_throttled_after_repeated_failures; these
add the edges an attacker would try."""

from __future__ import annotations

import time
from unittest import mock

import pytest
from django.test import Client

from .conftest import PASSWORD

THROTTLED = "Too many failed sign-ins"


def attempt(email: str, password: str, address: str = "203.0.113.7"):
    client = Client(REMOTE_ADDR=address)
    response = client.post("/signin/", {"username": email, "password": password})
    return response, "_auth_user_id" in client.session


def fail_until_throttled(email: str, settings, address: str = "203.0.113.7") -> None:
    for _ in range(settings.LOGIN_FAILURE_LIMIT):
        response, signed_in = attempt(email, "wrong password", address)
        assert response.status_code == 200 and not signed_in and THROTTLED not in response.content.decode()


def test_once_throttled_the_right_password_is_not_even_checked(two_customers, settings):
    """No password hashing while throttled: no oracle, no CPU to burn, same answer."""
    a, _ = two_customers
    fail_until_throttled(a.email, settings)
    with mock.patch("django.contrib.auth.backends.ModelBackend.authenticate") as authenticate:
        right, signed_in = attempt(a.email, PASSWORD)
        wrong, _ = attempt(a.email, "still wrong")
    assert not signed_in and authenticate.call_count == 0
    assert THROTTLED in right.content.decode() and THROTTLED in wrong.content.decode()


def test_case_and_spaces_in_the_email_do_not_reset_the_count(two_customers, settings):
    a, _ = two_customers
    variants = [a.email.upper(), f"  {a.email}  ", a.email.title()]
    for index in range(settings.LOGIN_FAILURE_LIMIT):
        attempt(variants[index % len(variants)], "wrong password")
    response, signed_in = attempt(a.email, PASSWORD)
    assert not signed_in and THROTTLED in response.content.decode()


def test_unknown_emails_are_throttled_like_known_ones(db, settings):
    """So the throttle does not tell which emails have accounts."""
    fail_until_throttled("nobody@example.com", settings)
    response, _ = attempt("nobody@example.com", "anything")
    assert THROTTLED in response.content.decode()


def test_the_throttle_is_per_address_and_per_email(two_customers, settings):
    a, b = two_customers
    fail_until_throttled(a.email, settings, address="203.0.113.7")
    assert attempt(a.email, PASSWORD, address="198.51.100.9")[1], "another address was locked out too"
    assert attempt(b.email, PASSWORD, address="203.0.113.7")[1], "another email was locked out too"


def test_the_throttle_lifts_after_its_window(two_customers, settings):
    # The window opens at the first failure; 3 s leaves the failures room on a loaded
    # machine (a 1 s window once closed before the fifth failure was counted).
    a, _ = two_customers
    settings.LOGIN_FAILURE_WINDOW_SECONDS = 3
    opened = time.monotonic()
    fail_until_throttled(a.email, settings)
    assert not attempt(a.email, PASSWORD)[1]
    time.sleep(max(0.0, opened + 3.5 - time.monotonic()))
    assert attempt(a.email, PASSWORD)[1]


@pytest.mark.parametrize("limit", [1, 3])
def test_the_limit_is_a_setting(two_customers, settings, limit):
    a, _ = two_customers
    settings.LOGIN_FAILURE_LIMIT = limit
    for _ in range(limit):
        attempt(a.email, "wrong password")
    assert THROTTLED in attempt(a.email, PASSWORD)[0].content.decode()
