"""The one error envelope of the API and the exception handler that produces it.

Every error leaves as
    {"error": {"code", "message", "details": {...}, "request_id"}}
whatever raised it: our own ApiError, a DRF exception, Django's Http404 or an unexpected
exception (500, never a stack trace)."""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions as drf
from rest_framework.response import Response

logger = logging.getLogger("config.api")


class ApiError(Exception):
    status_code = 400
    code = "invalid_parameter"
    default_message = "The request is not valid."

    def __init__(self, message: str | None = None, *, details: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None):
        self.message = message or self.default_message
        self.details = details or {}
        self.headers = headers or {}
        super().__init__(self.message)

    def envelope(self, request_id: str | None) -> dict:
        """This error as the API's envelope (every layer that answers an error calls this)."""
        return envelope(code=self.code, message=self.message, details=self.details, request_id=request_id)


class InvalidParameter(ApiError):
    status_code, code = 400, "invalid_parameter"

    def __init__(self, parameter: str, reason: str, message: str | None = None, **extra: Any):
        details = {"parameter": parameter, "reason": reason, **extra}
        super().__init__(message or f"Invalid parameter '{parameter}': {reason}", details=details)


class InvalidJson(ApiError):
    status_code, code = 400, "invalid_json"
    default_message = "The request body must be a JSON object."


class Unauthorized(ApiError):
    status_code, code = 401, "unauthorized"
    default_message = "A valid API key is required: send 'Authorization: Bearer <API_KEY>'."

    def __init__(self, message: str | None = None, **kwargs: Any):
        kwargs.setdefault("headers", {"WWW-Authenticate": 'Bearer realm="api"'})
        super().__init__(message, **kwargs)


class PaymentRequired(ApiError):
    status_code, code = 402, "payment_required"
    default_message = "This stream is not in the account's active streaming subscription."


class PlanForbidden(ApiError):
    status_code, code = 403, "plan_forbidden"
    default_message = "The account's plan does not include this feature."


class NotFound(ApiError):
    status_code, code = 404, "not_found"
    default_message = "No such resource."


class MethodNotAllowed(ApiError):
    status_code, code = 405, "method_not_allowed"


def _method_not_allowed(method: str, view) -> MethodNotAllowed:
    """405 naming the method to use instead (a GET on a POST-only series path, say)."""
    allowed = [m for m in view.allowed_methods if m != "OPTIONS"]
    use = " or ".join(allowed) or "another method"
    return MethodNotAllowed(f"{method} is not allowed here; use {use}.",
                            details={"method": method, "allowed": allowed},
                            headers={"Allow": ", ".join(view.allowed_methods)})


class PayloadTooLarge(ApiError):
    status_code, code = 413, "payload_too_large"
    default_message = "The request body is too large."


class UnsupportedMediaType(ApiError):
    status_code, code = 415, "unsupported_media_type"
    default_message = "The Accept header admits no served type: application/json or application/toon."


class QuotaExceeded(ApiError):
    status_code, code = 429, "quota_exceeded"
    default_message = "The account's monthly quota is used up."


class InternalError(ApiError):
    status_code, code = 500, "internal_error"
    default_message = "The service failed to answer this request. It has been logged."


class TemporarilyUnavailable(ApiError):
    status_code, code = 502, "temporarily_unavailable"
    default_message = "The streaming service is degraded; retry with backoff."


_CLIENT_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def request_id_from(offered: str | None) -> str:
    """A request's id: the client's own X-Request-Id when it sent a sane one, else a new one
    (Django's middleware, the event loop's answers and the SSE app all take it from here)."""
    return offered if offered and _CLIENT_REQUEST_ID.match(offered) else uuid.uuid4().hex


def envelope(*, code: str, message: str, details: dict | None, request_id: str | None) -> dict:
    """The one definition of the error envelope's shape."""
    return {"error": {"code": code, "message": message, "details": details or {},
                      "request_id": request_id or ""}}


def _drf_details(exc: drf.APIException) -> tuple[str, dict]:
    """A sentence and a details object for DRF's own exceptions."""
    detail = exc.detail
    if isinstance(detail, dict):
        parameter, reasons = next(iter(detail.items()), ("body", ["invalid"]))
        reason = reasons[0] if isinstance(reasons, list) and reasons else reasons
        return f"Invalid parameter '{parameter}': {reason}", {"parameter": str(parameter),
                                                               "reason": str(reason)}
    if isinstance(detail, list):
        reason = str(detail[0]) if detail else "invalid"
        return reason, {"reason": reason}
    return str(detail), {}


def dependency_unavailable(exc: BaseException) -> TemporarilyUnavailable | None:
    """502 `temporarily_unavailable` when a backing service cannot be reached: the
    database (down, restarting, no pooled connection in time) or Redis. Clients retry with
    backoff; the service recovers by itself when the dependency is back."""
    from django.db import InterfaceError, OperationalError

    if isinstance(exc, (OperationalError, InterfaceError)):
        logger.warning("Database unavailable: %s", exc)
        from config.db import check_idle_connections_soon

        check_idle_connections_soon()
        return TemporarilyUnavailable("The service's database is unavailable; retry with backoff.",
                                      details={"dependency": "database"})
    import redis

    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
        logger.warning("Redis unavailable: %s", exc)
        return TemporarilyUnavailable("The live backend is unavailable; retry with backoff.",
                                      details={"dependency": "redis"})
    return None


def as_api_error(exc: Exception) -> ApiError | None:
    """Translate any exception the API can meet into an ApiError; None for the unexpected."""
    if isinstance(exc, ApiError):
        return exc
    unavailable = dependency_unavailable(exc)
    if unavailable is not None:
        return unavailable
    if isinstance(exc, Http404):
        return NotFound()
    if isinstance(exc, RequestDataTooBig):
        return PayloadTooLarge()
    if isinstance(exc, (drf.NotAuthenticated, drf.AuthenticationFailed)):
        return Unauthorized(None if isinstance(exc, drf.NotAuthenticated) else str(exc.detail))
    if isinstance(exc, (drf.PermissionDenied, DjangoPermissionDenied)):
        return PlanForbidden()
    if isinstance(exc, drf.NotFound):
        return NotFound()
    if isinstance(exc, drf.MethodNotAllowed):
        error = MethodNotAllowed(str(exc.detail))
        return error
    if isinstance(exc, drf.ParseError):
        return InvalidJson(f"The request body is not valid JSON: {exc.detail}")
    if isinstance(exc, drf.UnsupportedMediaType):
        return InvalidJson("The request body must be sent as application/json.",
                           details={"parameter": "Content-Type", "reason": str(exc.detail)})
    if isinstance(exc, drf.NotAcceptable):
        return UnsupportedMediaType()
    if isinstance(exc, drf.Throttled):
        return ApiError(str(exc.detail))
    if isinstance(exc, drf.ValidationError):
        message, details = _drf_details(exc)
        return InvalidParameter(details.get("parameter", "body"), details.get("reason", message))
    if isinstance(exc, drf.APIException):
        error = ApiError(str(exc.detail))
        error.status_code = exc.status_code
        error.code = exc.default_code
        return error
    return None


def exception_handler(exc: Exception, context: dict) -> Response:
    request = context.get("request")
    error = as_api_error(exc)
    if error is None:
        logger.exception("Unhandled error in %s", getattr(request, "path", "?"), exc_info=exc)
        error = InternalError()
    request_id = getattr(getattr(request, "_request", request), "request_id", None)
    view = context.get("view")
    if isinstance(error, MethodNotAllowed) and view is not None and request is not None:
        error = _method_not_allowed(request.method, view)
    return Response(error.envelope(request_id), status=error.status_code, headers=error.headers)
