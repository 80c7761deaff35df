"""Answers served on the event loop, with no request thread.

A request served by Django takes a thread for its whole life, and every round trip to the
database from that thread hands the interpreter lock back and forth with the event loop
and the other requests: 0.3 ms of server CPU per round trip on a loaded server, most of
what a small answer costs over bare Django (docs/DECISIONS.md). An endpoint whose plain
case needs nothing but lookups this process already holds and statements made with
psycopg's async connections (config.db.fetch_prepared_on_loop) can be answered on the loop.

The endpoint's DRF view stays the one definition of its behaviour: a loop route names its
view (`LoopRoute`) and reads from it the method it answers, its authentication (each
authenticator's `authenticate_here`, the answer it can give without I/O), its permission
classes, its input serializer with the unknown-field rule, its renderers, its Allow header
and its quota declaration (`metered`, `counted_when_served`, counted through the meter the
view counts with, config.api.metering). A loop answer serves only the plain case and
declines (returns None) whenever anything else is asked: another method, a parameter to
check, an Accept header that admits nothing, a key this process has not verified lately or
one due for its recheck, an account not read lately, a permission the view would refuse, a
month found used up, a statement that failed. Declined requests go
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
from dataclasses import dataclass
from typing import Awaitable, Callable

from django.conf import settings
from django.core.exceptions import DisallowedHost, ImproperlyConfigured, PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.common import CommonMiddleware
from django.middleware.security import SecurityMiddleware
from rest_framework.exceptions import APIException

from config.api import metering
from config.api.media import CONTENT_TYPES, choose_format
from config.api.params import refuse_unknown_fields
from config.api.parsers import JSONObjectParser
from config.api.views import BODY_METHODS

from .api.errors import ApiError, dependency_unavailable
from .api.middleware import assign_request_id, oversized_body
from .db import statement_not_sent

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


@dataclass(frozen=True)
class LoopCall:
    """A plain request a loop route admitted, as its view would hold it."""

    request: HttpRequest
    format: str  # the negotiated format
    given: dict  # the view's input serializer's validated data ({} for a view without input)
    caller: object  # the view's authenticated user, its account read as the view reads it
    ticket: object  # the request's metering ticket, opened by the view's meter


class _Asked:
    """What a permission class reads of a request (DRF's Request: `user`, `auth`,
    `query_params`, `method`), to check the view's permissions without building one."""

    __slots__ = ("user", "auth", "query_params", "method")

    def __init__(self, request: HttpRequest, user, auth):
        self.user, self.auth, self.query_params, self.method = user, auth, request.GET, request.method


class LoopRoute:
    """The answer on the event loop to the plain requests of `view_class`, whose body
    `answer` makes (None: left to the view after all). Everything else is read from the
    view, once per process: the method (its one handler), authentication, permissions,
    input, formats, Allow header and quota declaration. A metered view is served here only
    when it is counted as it is served (`counted_when_served`): its count is one statement
    made as the answer leaves."""

    def __init__(self, view_class, answer: Callable[[LoopCall], Awaitable[bytes | None]]):
        view = view_class()
        view.setup(None)  # as Django's dispatch does: HEAD is answered by GET
        handlers = [method for method in view.allowed_methods if method not in ("HEAD", "OPTIONS")]
        if len(handlers) != 1:
            raise ImproperlyConfigured(f"{view_class.__name__}: a loop route answers one method, not {handlers}")
        self.view, self.method, self.answer = view, handlers[0], answer
        self.allow = ", ".join(view.allowed_methods)
        self.authenticators = tuple(view.get_authenticators())
        self.permissions = tuple(view.get_permissions())
        self.input = view.inputs.get(self.method)
        if self.input is not None and self.method not in BODY_METHODS:
            raise ImproperlyConfigured(f"{view_class.__name__}: a loop route reads a body's input, not a query's")
        self.formats = frozenset(renderer.format for renderer in view.get_renderers())
        self.metered = view.metered
        if self.metered and not view.counted_when_served:
            raise ImproperlyConfigured(f"{view_class.__name__} counts before it answers: the loop counts as it serves")

    def plain_input(self, request: HttpRequest) -> tuple[str, dict] | None:
        """(format, the view's validated input) of a request the view would take as it is:
        its method, a JSON object body of declared fields only, nothing but `format` in the
        query, a format the view renders and the Accept header admits. None otherwise."""
        if request.method != self.method:
            return None
        if self.method not in BODY_METHODS:
            fmt = plain_format(request)
            return (fmt, {}) if fmt in self.formats else None
        data = json_object(request)
        fmt = plain_format(request, data.get("format")) if data is not None else None
        if fmt not in self.formats:
            return None
        try:
            refuse_unknown_fields(data, self.input._declared_fields if self.input is not None else (), where="body")
            return fmt, self.input.read(data) if self.input is not None else {}
        except (ApiError, APIException):
            return None

    def caller(self, request: HttpRequest):
        """The view's authentication's (user, auth), when it can be given without I/O."""
        for authenticator in self.authenticators:
            here = getattr(authenticator, "authenticate_here", None)
            found = here(request) if here is not None else None
            if found is not None:
                return found
        return None

    def permits(self, request: HttpRequest, user, auth) -> bool:
        """The view's permission classes let the caller through (a refusal is the view's to answer)."""
        asked = _Asked(request, user, auth)
        try:
            return all(permission.has_permission(asked, self.view) for permission in self.permissions)
        except (ApiError, APIException):
            return False

    async def __call__(self, request: HttpRequest) -> HttpResponse | None:
        plain = self.plain_input(request)
        found = self.caller(request) if plain is not None else None
        if found is None or not self.permits(request, *found):
            return None
        user, meter = found[0], metering.meter
        meter.open(request, user.account, user.key_id)
        ticket = meter.ticket_of(request)
        if self.metered and meter.refused_lately(ticket):
            return None
        body = await self.answer(LoopCall(request, plain[0], plain[1], user, ticket))
        if body is None:
            return None
        response = finish(request, body, plain[0], self.allow)
        if self.metered:
            try:
                counted = await meter.count_on_loop(ticket, len(body))
            except Exception as exc:  # noqa: BLE001 - it may have been counted: the view must not count it again
                failed(exc)
                if statement_not_sent(exc):
                    return None  # nothing was counted: the view answers and counts it
                return site_response(request, meter.unrecorded(request, ticket, exc))
            if not counted:
                return None
        return with_quota(response, ticket)


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
