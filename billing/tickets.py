"""The metering ticket of a request: the account's plan limits for the month, the key and
endpoint the request is counted to, and what the counts were after it (the quota headers).
Opened when the request is authenticated (the API base view's metering hook), carried from
the view to the middleware on the Django request."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from datetime import date, datetime

from django.urls import Resolver404, resolve

from config import clock

from .models import KeyEndpointUsage
from .selectors import month_bounds


@dataclass
class Ticket:
    """The metering state of one request, carried from the view to the middleware."""

    account_id: int
    requests_limit: int
    bytes_limit: int
    month_start: date
    day: date
    resets_at: datetime
    counted: bool = False
    # counted by MeteringMiddleware when the answer is served (count_served), not before
    # the view: set by the quota throttle for views that read only and never stream
    count_when_served: bool = False
    requests_used: int | None = None
    bytes_used: int | None = None
    extra: dict = field(default_factory=dict)
    # what the request is counted to besides the account: the key that authenticated it
    # and its endpoint (`endpoint_of`); None when not known (nothing written per key)
    key_id: int | None = None
    endpoint: str | None = None

    @property
    def month_starts_at(self) -> datetime:
        return datetime(self.month_start.year, self.month_start.month, 1, tzinfo=self.resets_at.tzinfo)

    def headers(self) -> dict[str, str]:
        requests_used, bytes_used = self.requests_used or 0, self.bytes_used or 0
        return {
            "X-Quota-Requests-Limit": str(self.requests_limit),
            "X-Quota-Requests-Used": str(requests_used),
            "X-Quota-Requests-Remaining": str(max(self.requests_limit - requests_used, 0)),
            "X-Quota-Bytes-Limit": str(self.bytes_limit),
            "X-Quota-Bytes-Used": str(bytes_used),
            "X-Quota-Bytes-Remaining": str(max(self.bytes_limit - bytes_used, 0)),
            "X-Quota-Reset": str(int(self.resets_at.timestamp())),
        }


def attach(request, ticket: Ticket) -> None:
    """Give the request its ticket: the view counts with it, MeteringMiddleware adds the
    body's bytes and writes the quota headers from it (it sees Django's request, which is
    the one DRF's wraps)."""
    getattr(request, "_request", request).metering_ticket = ticket


def ticket_of(request) -> Ticket | None:
    """The ticket of a request (a DRF request or the Django request it wraps); None for a
    request without an authenticated account."""
    return getattr(getattr(request, "_request", request), "metering_ticket", None)


def ticket_attach(request, account, key_id: int | None) -> None:
    """Open and attach the ticket of an authenticated request (the API base view's
    metering hook, config.api.metering: installed by BillingConfig.ready)."""
    attach(request, open_ticket(account=account, key_id=key_id, endpoint=endpoint_of(request)))


def open_ticket(*, account, key_id: int | None = None, endpoint: str | None = None) -> Ticket:
    now = clock.utcnow()
    start, end = month_bounds(now)
    plan = account.plan
    return Ticket(account_id=account.pk, requests_limit=plan.monthly_requests,
                  bytes_limit=plan.monthly_bytes, month_start=start.date(), day=now.date(),
                  resets_at=end, key_id=key_id, endpoint=endpoint)


_endpoints: dict[tuple[str, str], str] = {}
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_ENDPOINT_MAX_LENGTH = KeyEndpointUsage._meta.get_field("endpoint").max_length
_ROUTE_PARAMETER = re.compile(r"<(?:[^>:]+:)?([^>]+)>")


def endpoint_label(method: str, route: str) -> str:
    """An endpoint as the customer reads it: the method and the URL pattern, its
    parameters named (`GET /api/v1/streams/{exchange}/{base}/{quote}/status`), never the
    raw path with its pair, so a pair's calls add up under one endpoint."""
    if method not in _METHODS:
        method = "OTHER"  # any token is a method to HTTP: never a line (or a cache entry) per made-up one
    label = _endpoints.get((method, route))
    if label is None:
        label = (f"{method} /" + _ROUTE_PARAMETER.sub(r"{\1}", route))[:_ENDPOINT_MAX_LENGTH]
        _endpoints[(method, route)] = label
    return label


@functools.lru_cache(maxsize=64)
def _route_of_path(path: str) -> str | None:
    """The URL pattern of a path, for requests answered before Django resolved them (the
    event loop's routes: a handful of fixed paths)."""
    try:
        return resolve(path).route
    except Resolver404:
        return None


def endpoint_of(request) -> str | None:
    """The endpoint (`endpoint_label`) of a request: its resolved URL pattern, the one the
    view it reaches (or the view a loop answer stands in for) is routed by."""
    request = getattr(request, "_request", request)
    match = getattr(request, "resolver_match", None)
    route = match.route if match is not None else _route_of_path(request.path_info)
    return endpoint_label(request.method, route) if route else None
