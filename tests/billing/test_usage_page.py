from datetime import datetime, timezone

import pytest
from django.test import Client

from billing import metering
from billing.tickets import open_ticket
from config import clock


@pytest.fixture
def signed_in(account):
    client = Client()
    client.force_login(account.users.get())
    return client


def _spend(account, when, requests, size):
    for _ in range(requests):
        ticket = open_ticket(account=account)
        ticket.day = when.date()
        ticket.month_start = when.date().replace(day=1)
        assert metering.count_request(ticket)
        metering.add_bytes(ticket, size)


def test_usage_page_shows_counts_limits_reset_and_a_day_chart(signed_in, account, monkeypatch):
    now = datetime(2026, 11, 20, 12, tzinfo=timezone.utc)
    monkeypatch.setattr(clock, "utcnow", lambda: now)
    _spend(account, datetime(2026, 11, 3, tzinfo=timezone.utc), 3, 1000)
    _spend(account, datetime(2026, 11, 20, tzinfo=timezone.utc), 2, 2048)
    html = signed_in.get("/account/usage/").content.decode()
    assert "<strong>5</strong> of 1,000,000" in html
    assert "2026-12-01 00:00 UTC" in html
    assert html.count('class="col"') == 30
    assert "2026-11-03: 3 requests" in html and "2026-11-20: 2 requests" in html


def test_usage_page_needs_sign_in(db):
    assert Client().get("/account/usage/").status_code == 302


def test_usage_page_has_a_plain_title_and_each_table_once(signed_in):
    html = signed_in.get("/account/usage/").content.decode()
    assert "<title>Usage · Market Data API</title>" in html
    assert html.count('id="usage-by-key"') == 1 and html.count('id="usage-by-endpoint"') == 1
