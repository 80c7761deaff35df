"""Answers of one account served at the same time are counted together, in one statement,
and exactly as if each had been counted alone in turn (billing.metering._CountingLane)."""

import threading
import time

import pytest
from django.db import OperationalError, connection

from billing import metering
from billing.tickets import open_ticket
from billing.models import UsageCounter

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ANSWERS = 40


@pytest.fixture
def groups(monkeypatch):
    """The sizes of every statement's group; each statement takes a moment, so answers
    arriving meanwhile pile up into the next group."""
    counted_together = metering._count_together
    seen = []

    def slow(ticket, sizes, keyed):
        seen.append(len(sizes))
        time.sleep(0.02)
        return counted_together(ticket, sizes, keyed)

    monkeypatch.setattr(metering, "_count_together", slow)
    return seen


def serve_at_once(account, sizes):
    """Each size counted by its own thread, all released together: (ticket, outcome) each,
    the outcome True, False (refused) or the exception raised."""
    tickets = [open_ticket(account=account) for _ in sizes]
    outcomes = [None] * len(sizes)
    start = threading.Barrier(len(sizes))

    def serve(i):
        start.wait()
        try:
            outcomes[i] = metering.count_served(tickets[i], sizes[i])
        except Exception as exc:  # noqa: BLE001 - the outcome under test
            outcomes[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=serve, args=(i,)) for i in range(len(sizes))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return list(zip(tickets, outcomes))


def rows(account):
    return {row.period: (row.requests, row.bytes) for row in UsageCounter.objects.filter(account=account)}


def test_answers_served_at_once_are_counted_exactly_each_with_the_counts_of_its_turn(account, groups):
    sizes = [100 + i for i in range(ANSWERS)]
    served = serve_at_once(account, sizes)
    assert all(outcome is True for _, outcome in served)
    assert max(groups) > 1 and sum(groups) == ANSWERS
    assert rows(account) == {"month": (ANSWERS, sum(sizes)), "day": (ANSWERS, sum(sizes))}
    in_turn = sorted(served, key=lambda pair: pair[0].requests_used)
    assert [ticket.requests_used for ticket, _ in in_turn] == list(range(1, ANSWERS + 1))
    bytes_so_far = 0
    for ticket, _ in in_turn:
        assert ticket.bytes_used - bytes_so_far in sizes  # its own body on top of those before it
        bytes_so_far = ticket.bytes_used
    assert bytes_so_far == sum(sizes)


def month_so_far(account, requests, bytes_):
    UsageCounter.objects.create(account=account, period="month", period_start=open_ticket(
        account=account).month_start, requests=requests, bytes=bytes_)


def test_a_group_that_would_cross_the_request_limit_is_counted_one_by_one(account, groups):
    # each group alone is under the limit; the month before it is what it would cross
    account.plan.monthly_requests = ANSWERS
    account.plan.save()
    month_so_far(account, ANSWERS - 10, 0)
    served = serve_at_once(account, [100] * ANSWERS)
    assert [outcome for _, outcome in served].count(True) == 10
    assert sorted(t.requests_used for t, outcome in served if outcome is True) == list(range(31, 41))
    assert rows(account) == {"month": (ANSWERS, 1000), "day": (10, 1000)}


def test_a_group_that_would_cross_the_byte_limit_is_counted_one_by_one(account, groups):
    # an answer is served while the bytes before it are under the limit: 3950, 4050 ... 4950
    account.plan.monthly_bytes = 5000
    account.plan.save()
    month_so_far(account, 0, 3950)
    served = serve_at_once(account, [100] * ANSWERS)
    assert [outcome for _, outcome in served].count(True) == 11
    assert rows(account) == {"month": (11, 3950 + 1100), "day": (11, 1100)}


def test_when_a_groups_statement_fails_its_first_answer_fails_and_the_others_count_alone(account, monkeypatch):
    counted_together = metering._count_together
    failed = []

    def first_group_fails(ticket, sizes, keyed):
        if len(sizes) > 1 and not failed:
            failed.append(len(sizes))
            raise OperationalError("the database went away")
        time.sleep(0.05)
        return counted_together(ticket, sizes, keyed)

    monkeypatch.setattr(metering, "_count_together", first_group_fails)
    served = serve_at_once(account, [100] * ANSWERS)
    errors = [outcome for _, outcome in served if isinstance(outcome, Exception)]
    assert failed and len(errors) == 1 and isinstance(errors[0], OperationalError)
    assert rows(account)["month"] == (ANSWERS - 1, 100 * (ANSWERS - 1))


def test_no_lane_is_left_behind(account, groups):
    serve_at_once(account, [100] * ANSWERS)
    assert metering._CountingLane._lanes == {}


def test_an_answer_counted_inside_a_transaction_is_counted_alone(account, monkeypatch):
    from django.db import transaction

    def no_lane(ticket, size):
        raise AssertionError("a count inside a transaction stood for other answers")

    monkeypatch.setattr(metering._CountingLane, "count", no_lane)
    with transaction.atomic():
        assert metering.count_served(open_ticket(account=account), 100)
    assert rows(account)["month"] == (1, 100)


def test_answers_of_several_keys_and_endpoints_counted_together_each_count_to_their_own(account, groups):
    from accounts.services import api_key_create
    from billing.models import KeyEndpointUsage

    keys = [api_key_create(account=account, name=name).api_key for name in ("a", "b")]
    endpoints = ["GET /api/v1/streams/{exchange}/{base}/{quote}/status", "POST /api/v1/market/candlestick"]
    where = [(keys[i % 2].pk, endpoints[(i // 2) % 2]) for i in range(ANSWERS)]
    sizes = [100 + i for i in range(ANSWERS)]
    tickets = [open_ticket(account=account, key_id=key_id, endpoint=endpoint) for key_id, endpoint in where]
    outcomes = [None] * ANSWERS
    start = threading.Barrier(ANSWERS)

    def serve(i):
        start.wait()
        try:
            outcomes[i] = metering.count_served(tickets[i], sizes[i])
        finally:
            connection.close()

    threads = [threading.Thread(target=serve, args=(i,)) for i in range(ANSWERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(outcomes) and max(groups) > 1
    expected = {}
    for (key_id, endpoint), size in zip(where, sizes):
        total = expected.setdefault((key_id, endpoint), [0, 0])
        total[0] += 1
        total[1] += size
    assert {(row.api_key_id, row.endpoint): [row.requests, row.bytes]
            for row in KeyEndpointUsage.objects.filter(account=account)} == expected
    assert rows(account)["month"] == (ANSWERS, sum(sizes))
