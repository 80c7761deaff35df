"""Sending one call and turning its answer into a document or an exception; the sync and
async halves share everything but the I/O.

A 429 is waited out only when asked (`wait_on_quota=True`) and only when the server's
Retry-After fits in what is left of `max_wait`: a monthly quota comes back at the start
of the next month, so waiting a part of that would only delay the same refusal."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import quote

import httpx

from . import wire
from .errors import ApiError, ProtocolError, QuotaExceeded, error_class_for
from .models import Quota

API_PREFIX = "/api/v1"
USER_AGENT = "marketdata-client-python/0.1.0"


@dataclass(frozen=True)
class Call:
    """One API request and how to read its document into a result."""

    method: str
    path: str  # below /api/v1
    read: Callable[..., Any]  # read(document, quota=..., request_id=..., status=...) -> result
    params: dict[str, Any] = field(default_factory=dict)
    json: dict[str, Any] | None = None


def api_base(base_url: str) -> str:
    """The server's root, whether or not the caller wrote the /api/v1 prefix."""
    base = base_url.rstrip("/")
    return base[: -len(API_PREFIX)] if base.endswith(API_PREFIX) else base


def pair_path(pair: str | tuple[str, str, str]) -> str:
    """`exchange/BASE/QUOTE` as URL path segments; the series' `BASE-QUOTE` form is refused
    here with the form to use (the API would answer 404)."""
    parts = tuple(pair) if isinstance(pair, (tuple, list)) else tuple(str(pair).strip("/").split("/"))
    if len(parts) != 3 or not all(parts):
        hint = ""
        if len(parts) == 2 and "-" in parts[1]:
            hint = f"; write {parts[0]}/{parts[1].replace('-', '/')}"
        raise ValueError(f"a pair is 'exchange/BASE/QUOTE' (e.g. 'binance/BTC/USDT'), not {pair!r}{hint}")
    return "/".join(quote(part, safe="") for part in parts)


def headers_for(api_key: str, format: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}", "Accept": wire.accept_header(format), "User-Agent": USER_AGENT}


def error_from(response: httpx.Response, document: Any = None) -> ApiError:
    """The exception of an error answer, from its envelope (or from its status alone when
    the body is not an envelope, as a proxy's 502 page is not)."""
    if document is None:
        try:
            document = wire.decode(response.content, response.headers.get("content-type"))
        except ProtocolError:
            document = None
    envelope = document.get("error") if isinstance(document, dict) else None
    if not isinstance(envelope, dict):
        envelope = {"code": f"http_{response.status_code}", "message": response.reason_phrase or "error"}
    cls = error_class_for(response.status_code)
    extra: dict[str, Any] = {}
    if cls is QuotaExceeded:
        try:
            extra["retry_after"] = float(response.headers["retry-after"])
        except (KeyError, ValueError):
            extra["retry_after"] = None
    return cls(response.status_code, str(envelope.get("code", "")), str(envelope.get("message", "")),
               envelope.get("details") if isinstance(envelope.get("details"), dict) else {},
               envelope.get("request_id") or response.headers.get("x-request-id"),
               quota=Quota.from_headers(response.headers), **extra)


def result_of(call: Call, response: httpx.Response) -> Any:
    """The typed result of a 2xx answer; raises the error of any other."""
    if response.status_code >= 400:
        raise error_from(response)
    document = (wire.decode(response.content, response.headers.get("content-type"))
                if response.content else None)
    try:
        return call.read(document, quota=Quota.from_headers(response.headers),
                         request_id=response.headers.get("x-request-id"), status=response.status_code)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ProtocolError(f"{call.method} {call.path}: unexpected answer {str(document)[:200]}") from exc


class QuotaWait:
    """How long to wait for a 429, or None to raise it."""

    def __init__(self, enabled: bool, max_wait: float):
        self.enabled, self.max_wait = enabled, max_wait

    def delay(self, error: QuotaExceeded, waited: float) -> float | None:
        if not self.enabled or error.retry_after is None:
            return None
        return error.retry_after if waited + error.retry_after <= self.max_wait else None


def request_kwargs(call: Call) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"params": call.params or None}
    if call.json is not None:
        kwargs["json"] = call.json
    return kwargs


class SyncTransport:
    def __init__(self, http: httpx.Client, quota_wait: QuotaWait, sleep: Callable[[float], None] = time.sleep):
        self.http, self.quota_wait, self.sleep = http, quota_wait, sleep

    def send(self, call: Call) -> Any:
        waited = 0.0
        while True:
            response = self.http.request(call.method, API_PREFIX + call.path, **request_kwargs(call))
            try:
                return result_of(call, response)
            except QuotaExceeded as error:
                delay = self.quota_wait.delay(error, waited)
                if delay is None:
                    raise
                self.sleep(delay)
                waited += delay


class AsyncTransport:
    def __init__(self, http: httpx.AsyncClient, quota_wait: QuotaWait,
                 sleep: Callable[[float], Any] = asyncio.sleep):
        self.http, self.quota_wait, self.sleep = http, quota_wait, sleep

    async def send(self, call: Call) -> Any:
        waited = 0.0
        while True:
            response = await self.http.request(call.method, API_PREFIX + call.path, **request_kwargs(call))
            try:
                return result_of(call, response)
            except QuotaExceeded as error:
                delay = self.quota_wait.delay(error, waited)
                if delay is None:
                    raise
                await self.sleep(delay)
                waited += delay
