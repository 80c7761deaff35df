"""The exceptions the client raises. Every refusal of the API arrives as one envelope
(`{"error": {"code", "message", "details", "request_id"}}`); each HTTP status maps to one
class, so callers catch what they can act on (a 402 is fixed by subscribing, a 429 by
waiting, a 502 by retrying) and still read the envelope on any of them."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .models import Quota


class MarketDataError(Exception):
    """Base of everything this package raises."""


class ApiError(MarketDataError):
    """The API answered with an error envelope."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None,
                 request_id: str | None = None, quota: Quota | None = None):
        super().__init__(f"{status} {code}: {message}" + (f" (request {request_id})" if request_id else ""))
        self.status = status
        self.code = code
        self.message = message
        self.details: dict[str, Any] = details or {}
        self.request_id = request_id
        self.quota = quota


class InvalidRequest(ApiError):
    """400 (`invalid_parameter`, `invalid_json`), and the other refusals of the request's
    form: 405, 413, 415. `details["parameter"]` names the offending field when there is one."""


class AuthenticationError(ApiError):
    """401 `unauthorized`: no key, or a malformed, unknown or revoked one."""


class PaymentRequired(ApiError):
    """402 `payment_required`: the pair is not subscribed (`details["reason"] ==
    "not_subscribed"`) or the payment lapsed (`"payment_lapsed"`)."""


class Forbidden(ApiError):
    """403 `plan_forbidden`: the plan lacks the feature (`api` or `streaming`)."""


class NotFound(ApiError):
    """404 `not_found`: no such path, or a pair that is not in the catalog."""


class QuotaExceeded(ApiError):
    """429 `quota_exceeded`: the month's requests or bytes are used up."""

    def __init__(self, *args: Any, retry_after: float | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.retry_after = retry_after  # seconds, from the Retry-After header
        resets_at = self.details.get("resets_at")
        self.resets_at: datetime | None = (datetime.fromisoformat(resets_at.replace("Z", "+00:00"))
                                           if isinstance(resets_at, str) else None)


class ServerError(ApiError):
    """500 `internal_error`."""


class Unavailable(ApiError):
    """502 / 503 `temporarily_unavailable`: a backing service is down; retry with backoff."""


class StreamClosed(MarketDataError):
    """The server ended the live feed with `stream-closed`: the pair was unsubscribed, the
    key revoked, the payment lapsed or the plan lost streaming. Reconnecting would be refused."""

    def __init__(self, reason: str, last_event_id: str | None = None):
        super().__init__(f"the live feed was closed by the server: {reason}")
        self.reason = reason
        self.last_event_id = last_event_id


class ProtocolError(MarketDataError):
    """The server's answer could not be read (not JSON or TOON, or not the documented shape)."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: InvalidRequest, 405: InvalidRequest, 413: InvalidRequest, 415: InvalidRequest,
    401: AuthenticationError, 402: PaymentRequired, 403: Forbidden, 404: NotFound,
    429: QuotaExceeded, 500: ServerError, 502: Unavailable, 503: Unavailable,
}


def error_class_for(status: int) -> type[ApiError]:
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return ServerError if status >= 500 else ApiError
