import logging

from config.api.errors import InternalError, TemporarilyUnavailable, dependency_unavailable
from config.api.media import CONTENT_TYPES, TOON
from config.api.middleware import error_response

from . import metering, tickets, usage

logger = logging.getLogger(__name__)


class MeteringMiddleware:
    """Adds the served body to the usage of a counted request (or, for a view counted when
    served, counts request and body at once, answering 429 instead when the month is used
    up) and writes the X-Quota-* headers on every response to an authenticated account. A streamed body carries the
    counts before it in its headers and is added when it finishes."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        ticket = tickets.ticket_of(request)
        if ticket is None:
            return response
        try:
            if ticket.count_when_served:
                if response.status_code >= 500:
                    # our failure (the database's, often) is not billed, and not waited
                    # on a second time for quota headers
                    return response
                if response.streaming:
                    raise RuntimeError("a view counted when served streamed its answer")
                if not metering.count_served(ticket, len(response.content)):
                    response = self._quota_refusal(request, ticket, response)
            elif not ticket.counted:
                if ticket.requests_used is None:  # else the view read it (/me/usage)
                    if response.status_code >= 500:
                        # a failure (the database's, often): no quota headers rather than a
                        # second wait on what just failed
                        return response
                    usage.read_month(ticket)
            elif response.streaming:
                counter = self._counting_async if response.is_async else self._counting
                response.streaming_content = counter(response.streaming_content, ticket)
            else:
                metering.add_bytes(ticket, len(response.content))
        except Exception as exc:
            return unmetered_refusal(request, ticket, exc)
        for name, value in ticket.headers().items():
            response[name] = value
        return response

    @staticmethod
    def _counting(chunks, ticket):
        size = 0
        try:
            for chunk in chunks:
                size += len(chunk)
                yield chunk
        finally:
            metering.add_bytes(ticket, size)

    @staticmethod
    async def _counting_async(chunks, ticket):
        from asgiref.sync import sync_to_async

        size = 0
        try:
            async for chunk in chunks:
                size += len(chunk)
                yield chunk
        finally:
            await sync_to_async(metering.add_bytes)(ticket, size)

    @staticmethod
    def _quota_refusal(request, ticket, served):
        """The 429 that replaces an answer the month could no longer pay for, in the
        answer's own format."""
        toon = served.get("Content-Type", "").startswith(CONTENT_TYPES[TOON].split(";")[0])
        return error_response(request, metering.quota_refusal(ticket), fmt=TOON if toon else None)


def unmetered_refusal(request, ticket, exc: Exception):
    """What a request gets when its usage could not be recorded (the counter statement
    failed): nothing is served, 503 when the database is out of reach, else 500."""
    unavailable = dependency_unavailable(exc)
    if unavailable is None:
        logger.exception("Usage could not be recorded for account %s", ticket.account_id, exc_info=exc)
    message = "Usage could not be recorded, so nothing was served. Retry shortly."
    error = InternalError(message) if unavailable is None else \
        TemporarilyUnavailable(message, details=unavailable.details)
    return error_response(request, error)
