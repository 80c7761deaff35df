"""Metering: every counted request adds 1 request and the exact length of the body it
served to the account's UTC-month counter, and the quota is enforced before the view runs.

Counting is one atomic upsert per phase, correct across any number of server processes:
  1. before the view: +1 request, only while the month is under both limits; no row
     back means the budget was already crossed, and the request is refused with 429
     without being counted;
  2. after the body is rendered: + its byte length, to the month and to the day.
If a write fails the request fails: nothing is served unmetered."""

from __future__ import annotations

import logging
import threading
import time
from datetime import date

from django.conf import settings
from django.db import connection, transaction

from config import clock
from config.api.errors import QuotaExceeded
from config.db import fetch_one_prepared, fetch_prepared, fetch_prepared_on_loop

from .models import KeyEndpointUsage, UsageCounter
from .selectors import iso_utc
from .tickets import Ticket, ticket_of
from .usage import read_month

logger = logging.getLogger(__name__)

_TABLE = UsageCounter._meta.db_table
_COUNT_REQUEST = f"""
INSERT INTO {_TABLE} (account_id, period, period_start, requests, bytes)
VALUES (%s, 'month', %s, 1, 0)
ON CONFLICT (account_id, period, period_start) DO UPDATE
   SET requests = {_TABLE}.requests + 1
 WHERE {_TABLE}.requests < %s AND {_TABLE}.bytes < %s
RETURNING requests, bytes
"""
_ADD_BYTES = f"""
INSERT INTO {_TABLE} (account_id, period, period_start, requests, bytes)
VALUES (%s, 'month', %s, 0, %s), (%s, 'day', %s, %s, %s)
ON CONFLICT (account_id, period, period_start) DO UPDATE
   SET requests = {_TABLE}.requests + excluded.requests,
       bytes = {_TABLE}.bytes + excluded.bytes
RETURNING period, requests, bytes
"""
# Count served answers, requests and bodies at once, only while the month is under both
# limits before each of them: `k` answers of `size` bytes in all pass together when the
# month before them holds fewer than limit - (k - 1) requests and, with all but the last
# body, fewer than the byte limit (one answer: the month is under both limits). The day row
# follows the month's (no month row back: nothing is written). One statement on
# PostgreSQL; SQLite has no data-modifying WITH, so there the two upserts run in one local
# transaction.
_COUNT_SERVED_MONTH = f"""
INSERT INTO {_TABLE} (account_id, period, period_start, requests, bytes)
SELECT %(account)s, 'month', %(month)s, %(k)s, %(size)s
 WHERE %(k)s - 1 < %(requests_limit)s AND %(size)s - %(last)s < %(bytes_limit)s
ON CONFLICT (account_id, period, period_start) DO UPDATE
   SET requests = {_TABLE}.requests + excluded.requests, bytes = {_TABLE}.bytes + excluded.bytes
 WHERE {_TABLE}.requests + excluded.requests - 1 < %(requests_limit)s
   AND {_TABLE}.bytes + excluded.bytes - %(last)s < %(bytes_limit)s
RETURNING requests, bytes
"""
_COUNT_SERVED_DAY = f"""
INSERT INTO {_TABLE} (account_id, period, period_start, requests, bytes)
{{source}}
ON CONFLICT (account_id, period, period_start) DO UPDATE
   SET requests = {_TABLE}.requests + excluded.requests, bytes = {_TABLE}.bytes + excluded.bytes
"""
_COUNT_SERVED = (f"WITH month AS ({_COUNT_SERVED_MONTH}), day AS ("
                 + _COUNT_SERVED_DAY.format(source="SELECT %(account)s, 'day', %(day)s, %(k)s, %(size)s FROM month")
                 + ") SELECT requests, bytes FROM month")
_COUNT_SERVED_DAY_ALONE = _COUNT_SERVED_DAY.format(
    source="SELECT %(account)s, 'day', %(day)s, %(k)s, %(size)s WHERE true")
# Per key and endpoint (KeyEndpointUsage): the same statements write them, one more
# sub-statement in the round trip that counts the month, never a trip of their own. A
# group's answers are summed per key and endpoint first (one row may appear once in an
# upsert). The rows follow the month row: nothing is written when the month refused.
_KEYED = KeyEndpointUsage._meta.db_table
_KEYED_UPSERT = f"""
INSERT INTO {_KEYED} (account_id, api_key_id, endpoint, month, requests, bytes, last_request_ms)
{{source}}
ON CONFLICT (api_key_id, endpoint, month) DO UPDATE
   SET requests = {_KEYED}.requests + excluded.requests, bytes = {_KEYED}.bytes + excluded.bytes,
       last_request_ms = {{latest}}({_KEYED}.last_request_ms, excluded.last_request_ms)
"""
_KEYED_FROM_ARRAYS = _KEYED_UPSERT.format(latest="GREATEST", source=(
    "SELECT %(account)s, keyed.key_id, keyed.endpoint, %(month)s, keyed.requests, keyed.bytes, %(now_ms)s"
    " FROM unnest(%(key_ids)s::bigint[], %(endpoints)s::text[], %(key_requests)s::bigint[],"
    " %(key_bytes)s::bigint[]) AS keyed(key_id, endpoint, requests, bytes) WHERE EXISTS (SELECT 1 FROM {after})"))
_COUNT_SERVED_KEYED = (f"WITH month AS ({_COUNT_SERVED_MONTH}), day AS ("
                       + _COUNT_SERVED_DAY.format(
                           source="SELECT %(account)s, 'day', %(day)s, %(k)s, %(size)s FROM month")
                       + "), keyed AS (" + _KEYED_FROM_ARRAYS.format(after="month")
                       + ") SELECT requests, bytes FROM month")
_ADD_BYTES_NAMED = _ADD_BYTES.replace("%s", "{}").format(
    "%(account)s", "%(month)s", "%(size)s", "%(account)s", "%(day)s", "1", "%(size)s")
_ADD_BYTES_KEYED = ("WITH counted AS (" + _ADD_BYTES_NAMED
                    + "), keyed AS (" + _KEYED_FROM_ARRAYS.format(after="counted")
                    + ") SELECT period, requests, bytes FROM counted")
# SQLite (no data-modifying WITH, no GREATEST): one upsert per key and endpoint, in the
# local transaction of the month's and the day's
_KEYED_ALONE = _KEYED_UPSERT.format(latest="MAX", source=(
    "VALUES (%(account)s, %(key_id)s, %(endpoint)s, %(month)s, %(requests)s, %(bytes)s, %(now_ms)s)"))
def count_request(ticket: Ticket) -> bool:
    """Count the request if the month is under both limits; False when it is not (429)."""
    if ticket.requests_limit <= 0 or ticket.bytes_limit <= 0:
        return _refused(ticket)
    row = fetch_one_prepared(_COUNT_REQUEST, [ticket.account_id, ticket.month_start,
                                              ticket.requests_limit, ticket.bytes_limit])
    if row is None:
        return _refused(ticket)
    ticket.counted = True
    ticket.requests_used, ticket.bytes_used = row
    return True


def count_served(ticket: Ticket, size: int) -> bool:
    """Count an answer of `size` bytes about to be served, request and bytes to the month
    and the day at once, if the month is under both limits; False when it is not (the
    answer is replaced by a 429). Exact under concurrency: the month row's lock decides.

    Answers of one account served at the same time by this process are counted together
    (`_CountingLane`): while one statement is in flight, the answers that arrive wait and
    go in the next one, which counts them only if all of them pass; when they do not all
    fit under the limits, each is counted alone, as if it had come alone. Every answer is
    counted before it leaves, and each gets the counts it would have had in turn."""
    if ticket.requests_limit <= 0 or ticket.bytes_limit <= 0:
        return _refused(ticket)
    if connection.vendor == "postgresql" and not connection.in_atomic_block:
        counts = _CountingLane.count(ticket, size)
    else:
        # inside a transaction the count is only as final as that transaction: it cannot
        # stand for other answers
        counts = _count_together(ticket, [size], [_keyed(ticket)])
    if counts is None:
        return _refused(ticket)
    ticket.counted = True
    ticket.requests_used, ticket.bytes_used = counts
    return True


def _keyed(ticket: Ticket) -> tuple[int, str] | None:
    """What an answer is counted to per key: (key id, endpoint), or None."""
    return (ticket.key_id, ticket.endpoint) if ticket.key_id is not None and ticket.endpoint else None


def _per_key(sizes: list[int], keyed: list) -> dict[tuple[int, str], list[int]]:
    """Answers summed per key and endpoint: {(key id, endpoint): [requests, bytes]}."""
    totals: dict[tuple[int, str], list[int]] = {}
    for size, where in zip(sizes, keyed):
        if where is not None:
            total = totals.setdefault(where, [0, 0])
            total[0] += 1
            total[1] += size
    return totals


def _keyed_params(params: dict, totals: dict) -> dict:
    params.update(now_ms=clock.now_ms(), key_ids=[key_id for key_id, _ in totals],
                  endpoints=[endpoint for _, endpoint in totals],
                  key_requests=[requests for requests, _ in totals.values()],
                  key_bytes=[bytes_ for _, bytes_ in totals.values()])
    return params


def _keyed_alone(cursor, params: dict, totals: dict) -> None:
    """The rows per key and endpoint, on a database without data-modifying WITH (SQLite)."""
    now_ms = clock.now_ms()
    for (key_id, endpoint), (requests, bytes_) in totals.items():
        cursor.execute(_KEYED_ALONE, {"account": params["account"], "key_id": key_id, "endpoint": endpoint,
                                      "month": params["month"], "requests": requests, "bytes": bytes_,
                                      "now_ms": now_ms})


def _count_together(ticket: Ticket, sizes: list[int], keyed: list) -> tuple[int, int] | None:
    """One statement for answers that pass only all together: the month's counts after
    the last of them, or None when they do not all fit (nothing is written). `keyed`:
    each answer's (key id, endpoint) or None, counted in the same statement."""
    params, totals = _served_params(ticket, sizes), _per_key(sizes, keyed)
    if connection.vendor == "postgresql":
        if totals:
            return fetch_one_prepared(_COUNT_SERVED_KEYED, _keyed_params(params, totals))
        return fetch_one_prepared(_COUNT_SERVED, params)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_COUNT_SERVED_MONTH, params)
        row = cursor.fetchone()
        if row is not None:
            cursor.execute(_COUNT_SERVED_DAY_ALONE, params)
            _keyed_alone(cursor, params, totals)
    return row


def _served_params(ticket: Ticket, sizes: list[int]) -> dict:
    return {"account": ticket.account_id, "month": ticket.month_start, "day": ticket.day, "k": len(sizes),
            "size": sum(sizes), "last": sizes[-1], "requests_limit": ticket.requests_limit,
            "bytes_limit": ticket.bytes_limit}


async def count_served_on_loop(ticket: Ticket, size: int) -> bool:
    """`count_served` from the event loop (config/loop.py), PostgreSQL only: one statement
    per answer, exact under concurrency as every count is (the month row's lock decides).
    False when the month cannot pay for the answer: nothing is written, and the request is
    left to the request threads' path, which answers the 429 with its counts."""
    if ticket.requests_limit <= 0 or ticket.bytes_limit <= 0:
        return False
    params, totals = _served_params(ticket, [size]), _per_key([size], [_keyed(ticket)])
    statement = _COUNT_SERVED_KEYED if totals else _COUNT_SERVED
    rows = await fetch_prepared_on_loop(statement, _keyed_params(params, totals) if totals else params)
    if not rows:
        return False
    ticket.counted = True
    ticket.requests_used, ticket.bytes_used = rows[0]
    return True


class _CountingGroup:
    __slots__ = ("sizes", "keyed", "turn", "done", "counts", "failed")

    def __init__(self):
        self.sizes: list[int] = []
        self.keyed: list[tuple[int, str] | None] = []
        self.turn = threading.Event()  # the statement before this group's is done
        self.done = threading.Event()
        self.counts: tuple[int, int] | None = None
        self.failed = False


class _CountingLane:
    """The answers of one account, month and plan that this process is counting: at most
    one statement in flight; answers arriving meanwhile form the next group, whose first
    answer's thread runs the group's statement once the one in flight is done."""

    _lanes: dict[tuple, _CountingLane] = {}
    _lock = threading.Lock()

    def __init__(self):
        self.running = False
        self.waiting: _CountingGroup | None = None

    @classmethod
    def count(cls, ticket: Ticket, size: int) -> tuple[int, int] | None:
        """The month's counts with this answer in its turn, or None when it is refused."""
        key = (ticket.account_id, ticket.month_start, ticket.day, ticket.requests_limit, ticket.bytes_limit)
        # Any answer in a lane may have to run its group's statement: each holds its
        # database connection before joining, or answers waiting in the lane could hold
        # every connection of the pool while the one that must run waits for one.
        connection.ensure_connection()
        with cls._lock:
            lane = cls._lanes.get(key)
            if lane is None:
                lane = cls._lanes[key] = cls()
            if lane.running:
                if lane.waiting is None:
                    lane.waiting = _CountingGroup()
                group = lane.waiting
            else:
                lane.running = True
                group = _CountingGroup()
                group.turn.set()
            place = len(group.sizes)
            group.sizes.append(size)
            group.keyed.append(_keyed(ticket))
        if place == 0:
            lane._run(key, group, ticket)
        else:
            group.done.wait()
        if group.counts is None:
            if len(group.sizes) == 1 and not group.failed:
                return None
            # not all of them fit under the limits (or the first one's statement failed):
            # each is counted alone, as if it had come alone
            return _count_together(ticket, [size], [_keyed(ticket)])
        requests, bytes_ = group.counts
        later = group.sizes[place + 1:]
        return requests - len(later), bytes_ - sum(later)

    def _run(self, key: tuple, group: _CountingGroup, ticket: Ticket) -> None:
        group.turn.wait()
        with self._lock:
            if self.waiting is group:
                self.waiting = None  # answers from now on form the next group
        try:
            group.counts = _count_together(ticket, group.sizes, group.keyed)
        except BaseException:
            group.failed = True
            raise
        finally:
            group.done.set()
            with self._lock:
                if self.waiting is not None:
                    self.waiting.turn.set()
                else:
                    self.running = False
                    del self._lanes[key]


# Accounts this process found over quota lately, with the month's counts then: their next
# answers counted when served are refused before the view runs while those counts still
# meet the plan's limits, for as long as the process reuses an account it read (usage only
# grows within a month; a raised quota applies as soon as the process sees the plan).
_refused_lately: dict[tuple[int, date], tuple[float, int, int]] = {}
_REFUSED_LATELY_MEMORY = 100_000


def _refused(ticket: Ticket) -> bool:
    read_month(ticket)
    if len(_refused_lately) >= _REFUSED_LATELY_MEMORY:
        _refused_lately.clear()
    _refused_lately[(ticket.account_id, ticket.month_start)] = (
        time.monotonic(), ticket.requests_used, ticket.bytes_used)
    return False


def refused_lately(ticket: Ticket) -> bool:
    """The month was over the ticket's limits when this process last counted for the
    account, less than ACCOUNT_CACHE_SECONDS ago."""
    seen = _refused_lately.get((ticket.account_id, ticket.month_start))
    if seen is None or time.monotonic() - seen[0] >= settings.ACCOUNT_CACHE_SECONDS:
        return False
    return seen[1] >= ticket.requests_limit or seen[2] >= ticket.bytes_limit


def quota_refusal(ticket: Ticket) -> QuotaExceeded:
    """429 in the API's words: which quota is used up and when it resets (Retry-After)."""
    resets_at = iso_utc(ticket.resets_at)
    used = "requests" if (ticket.requests_used or 0) >= ticket.requests_limit else "bytes"
    wait = max((ticket.resets_at - clock.utcnow()).total_seconds(), 1.0)
    return QuotaExceeded(
        f"The monthly {used} quota of the account's plan is used up; it resets at {resets_at}.",
        details={"resets_at": resets_at, "exhausted": used},
        headers={"Retry-After": str(int(wait))})


def request_refusal(request) -> QuotaExceeded:
    """`quota_refusal` of a request the quota throttle refused (the metering hook's)."""
    return quota_refusal(ticket_of(request))


def add_bytes(ticket: Ticket, size: int) -> None:
    """Add a served body to the month, and the request with its body to the day and to its
    key and endpoint (in the same statement)."""
    totals = _per_key([size], [_keyed(ticket)])
    if not totals:
        rows = fetch_prepared(_ADD_BYTES, [ticket.account_id, ticket.month_start, size,
                                           ticket.account_id, ticket.day, 1, size])
    else:
        params = {"account": ticket.account_id, "month": ticket.month_start, "day": ticket.day, "size": size}
        if connection.vendor == "postgresql":
            rows = fetch_prepared(_ADD_BYTES_KEYED, _keyed_params(params, totals))
        else:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(_ADD_BYTES_NAMED, params)
                rows = cursor.fetchall()
                _keyed_alone(cursor, params, totals)
    for period, requests, bytes_ in rows:
        if period == "month":
            ticket.requests_used, ticket.bytes_used = requests, bytes_
