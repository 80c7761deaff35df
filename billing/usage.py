"""Reading an account's month: its counters (the quota headers of a refusal), and for
/me/usage the counters, the pairs it streams and the month per key and endpoint, in one
statement, from a request thread or the event loop."""

from __future__ import annotations

from dataclasses import dataclass

from config.db import fetch_one_prepared, fetch_prepared, fetch_prepared_on_loop
from accounts.models import ApiKey

from .models import KeyEndpointUsage, UsageCounter
from .tickets import Ticket

_TABLE = UsageCounter._meta.db_table
_KEYED = KeyEndpointUsage._meta.db_table
_READ_MONTH = f"SELECT requests, bytes FROM {_TABLE} WHERE account_id = %s AND period = 'month' AND period_start = %s"
# The month, the streamed pairs and one row per key and endpoint (none: one row of nulls
# for them), in one statement. The streamed pairs are rows of the streaming app's
# subscriptions table, an app above this one: it names its table when it is ready
# (`streamed_pairs_table_install`), so billing reads it without importing it.
def _read_usage_statement(subscriptions_table: str | None) -> str:
    # no streaming app: none streamed (a count of nothing, so the parameters stay the same)
    streamed_pairs = (f"(SELECT count(*) FROM {subscriptions_table} WHERE account_id = %s)"
                      if subscriptions_table else f"(SELECT count(*) FROM {_TABLE} WHERE account_id = %s AND 1 = 0)")
    return f"""
SELECT month.requests, month.bytes,
       {streamed_pairs},
       api_key.lookup_id, api_key.name, api_key.revoked_at IS NOT NULL,
       keyed.endpoint, keyed.requests, keyed.bytes, keyed.last_request_ms
  FROM (SELECT 1) AS one
  LEFT JOIN {_TABLE} AS month
    ON month.account_id = %s AND month.period = 'month' AND month.period_start = %s
  LEFT JOIN {_KEYED} AS keyed ON keyed.account_id = %s AND keyed.month = %s
  LEFT JOIN {ApiKey._meta.db_table} AS api_key ON api_key.id = keyed.api_key_id
 ORDER BY api_key.created_at, api_key.id, keyed.requests DESC, keyed.endpoint
"""


_READ_USAGE = _read_usage_statement(None)


def streamed_pairs_table_install(table: str) -> None:
    """The table /me/usage counts an account's streamed pairs in: one row per account and
    pair it streams, with an account_id column (StreamingConfig.ready names it)."""
    global _READ_USAGE
    _READ_USAGE = _read_usage_statement(table)


def read_month(ticket: Ticket) -> Ticket:
    row = fetch_one_prepared(_READ_MONTH, [ticket.account_id, ticket.month_start])
    ticket.requests_used, ticket.bytes_used = row if row else (0, 0)
    return ticket


@dataclass(frozen=True)
class KeyEndpointCount:
    """This month's requests and bytes of one key on one endpoint."""

    key_lookup_id: str
    key_name: str
    key_revoked: bool
    endpoint: str
    requests: int
    bytes: int
    last_request_ms: int


@dataclass(frozen=True)
class UsageRead:
    streamed_pairs: int
    per_key_endpoint: list[KeyEndpointCount]


def read_usage(ticket: Ticket) -> UsageRead:
    """The month's counters onto the ticket, the pairs the account streams now and the
    month per key and endpoint, in one statement (/me/usage)."""
    return _usage_onto(ticket, fetch_prepared(_READ_USAGE, _usage_params(ticket)))


async def read_usage_on_loop(ticket: Ticket) -> UsageRead:
    """`read_usage` from the event loop (config.db.fetch_prepared_on_loop)."""
    return _usage_onto(ticket, await fetch_prepared_on_loop(_READ_USAGE, _usage_params(ticket)))


def _usage_params(ticket: Ticket) -> list:
    return [ticket.account_id, ticket.account_id, ticket.month_start, ticket.account_id, ticket.month_start]


def _usage_onto(ticket: Ticket, rows: list[tuple]) -> UsageRead:
    requests, bytes_, streamed_pairs = rows[0][:3]
    ticket.requests_used, ticket.bytes_used = requests or 0, bytes_ or 0
    return UsageRead(streamed_pairs=streamed_pairs, per_key_endpoint=[
        KeyEndpointCount(key_lookup_id=row[3], key_name=row[4], key_revoked=bool(row[5]), endpoint=row[6],
                         requests=row[7], bytes=row[8], last_request_ms=row[9])
        for row in rows if row[6] is not None])
