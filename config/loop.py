"""Answers served on the event loop, with no request thread.

A request served by Django takes a thread for its whole life, and every round trip to the
database from that thread hands the interpreter lock back and forth with the event loop
and the other requests: 0.3 ms of server CPU per round trip on a loaded server, most of
what a small answer costs over bare Django (docs/DECISIONS.md). An endpoint whose plain
case needs nothing but lookups this process already holds and statements made with
psycopg's async connections (config.db.fetch_prepared_on_loop) can be answered on the loop.

The endpoint's DRF view stays the one definition of its behaviour. A loop answer serves
only the plain case and declines (returns None) whenever anything else is asked: another
method, a parameter to check, an Accept header that admits nothing, a key this process has
not verified lately or one due for its recheck, an account not read lately (both judged by
accounts.authentication.caller_known_here), a statement that failed. Declined requests go
to Django unchanged (a POST's body, read here, is given to Django again). What Django's
middleware checks and adds (the Host, the HTTPS redirect; X-Request-Id, the security
headers, Content-Length) comes from the same middleware classes
(`site_allows`, `site_response`), and tests hold the two paths to the same status, body
and headers.

Routes are listed in config/urls.py (`LOOP_ROUTES`), beside the views they shortcut."""

from __future__ import annotations

import functools
import io
import logging
import time
from typing import Awaitable, Callable

from django.conf import settings
from django.core.exceptions import DisallowedHost, PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.common import CommonMiddleware
from django.middleware.security import SecurityMiddleware

from config.api.media import CONTENT_TYPES, choose_format
from config.api.parsers import JSONObjectParser

from .api.errors import dependency_unavailable
from .api.middleware import assign_request_id, oversized_body

logger = logging.getLogger(__name__)

LoopAnswer = Callable[[HttpRequest], Awaitable[HttpResponse | None]]


# The middleware of settings.MIDDLEWARE that acts on an API request or its answer, used as
# Django's chain uses them; the others (sessions, CSRF, user, messages) do nothing for a
# request authenticated by key.
# Built once per process, as Django builds its chain (they read their settings then).
@functools.cache
def site_middleware() -> tuple:
    return tuple(cls(lambda request: None) for cls in (SecurityMiddleware, CommonMiddleware, XFrameOptionsMiddleware))


def site_allows(request: HttpRequest) -> bool:
    """Django's middleware would let the request reach its view: an allowed Host, no
    redirect (to HTTPS, to a slash), no refused user agent, no oversized body."""
    security, common, _ = site_middleware()
    try:
        return security.process_request(request) is None and common.process_request(request) is None \
            and oversized_body(request) is None
    except (DisallowedHost, PermissionDenied):
        return False


def site_response(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """`response` as Django's middleware sends a view's answer: in settings.MIDDLEWARE's
    reverse order, the frame options, Content-Length, the security headers, X-Request-Id."""
    security, common, frame_options = site_middleware()
    response = frame_options.process_response(request, response)
    response = common.process_response(request, response)
    response = security.process_response(request, response)
    response["X-Request-Id"] = request.request_id  # as RequestIdMiddleware, which `answer` stood in for
    return response


def plain_format(request: HttpRequest, body_format: object = None) -> str | None:
    """The format of a request whose only query parameter is a valid `format`, whose body's
    `format` (if any) is valid and whose Accept header admits what it asks for; None for
    anything that needs the view's checks."""
    query = request.GET
    if len(query) > 1 or (query and "format" not in query) or len(query.getlist("format")) > 1:
        return None
    choice = choose_format(request.META.get("HTTP_ACCEPT"), body_format, query.get("format"))
    if choice.error is not None or not choice.acceptable:
        return None
    return choice.format


def json_object(request: HttpRequest) -> dict | None:
    """The body of a POST that sent a JSON object as JSON; None for anything the view's
    parser must judge (another type, an empty or malformed body, another JSON value)."""
    if request.content_type != "application/json" or not request.body.strip():
        return None
    try:
        return JSONObjectParser().parse(io.BytesIO(request.body))
    except Exception:  # noqa: BLE001 - malformed, not an object, too large: the view reports it
        return None


def allow_header(view_class) -> str:
    """The Allow header DRF gives the view's answers."""
    view = view_class()
    view.setup(None)  # as Django's dispatch does: HEAD is answered by GET
    return ", ".join(view.allowed_methods)


def finish(request: HttpRequest, body: bytes, fmt: str, allow: str) -> HttpResponse:
    """A view's 200 answer as DRF and the middleware would send it: its format's type,
    Vary and Allow, then `site_response`. The quota headers come last (`with_quota`), once
    the request is counted: nothing that can fail is left after the count."""
    response = HttpResponse(body, content_type=CONTENT_TYPES[fmt])
    response["Vary"] = "Accept"
    response["Allow"] = allow
    return site_response(request, response)


def with_quota(response: HttpResponse, ticket) -> HttpResponse:
    """The X-Quota-* headers of the request's metering ticket, as MeteringMiddleware writes them."""
    for name, value in ticket.headers().items():
        response[name] = value
    return response


# After the database failed a statement (restarting, out of reach, the loop's pool
# exhausted past its timeout) the loop declines everything for this long: Django's path
# answers meanwhile, with its own bounds and error envelope, instead of each request
# waiting out the loop's pool first.
DECLINE_AFTER_FAILURE_SECONDS = 1.0
_declining_until = 0.0


def failed(exc: Exception) -> None:
    """Note a failure: a database that is out of reach stops the loop's answers for a moment."""
    global _declining_until
    if dependency_unavailable(exc) is not None:
        _declining_until = time.monotonic() + DECLINE_AFTER_FAILURE_SECONDS


async def answer(route: LoopAnswer, request: HttpRequest) -> HttpResponse | None:
    """The route's answer, or None (declined: Django serves the request)."""
    if time.monotonic() < _declining_until or not site_allows(request):
        return None
    assign_request_id(request)
    try:
        return await route(request)
    except Exception as exc:  # noqa: BLE001 - Django answers instead, with its own error handling
        failed(exc)
        logger.info("Declined on the event loop: %s (%s)", request.path, exc)
        return None


async def read_body(receive) -> tuple[bytes | None, list[dict]]:
    """The request body and the ASGI messages it came in; None for the body when it is over
    the upload limit (the middleware answers 413) or the client disconnected."""
    messages, size, limit = [], 0, settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return None, messages
        size += len(message.get("body", b""))
        if size > limit:
            return None, messages
        if not message.get("more_body", False):
            return b"".join(m.get("body", b"") for m in messages), messages


def replaying(messages: list[dict], receive):
    """A `receive` that gives the messages already read again, then the connection's own."""
    if not messages:
        return receive
    pending = list(messages)

    async def again():
        return pending.pop(0) if pending else await receive()

    return again
