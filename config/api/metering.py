"""The metering hook of the API base view (config.api.views.AccountAPIView).

Every API view counts its requests against the caller's plan, but plans and usage counters
are billing's, an app above this layer. So this layer holds only the hook, and billing
fills it in when it is ready (BillingConfig.ready, `meter_install`): the view calls the
installed functions directly, the same calls it made when it lived in billing, with no
lookup or signal per request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable

from django.core.exceptions import ImproperlyConfigured


@dataclass(frozen=True)
class Meter:
    # Opens the request's metering ticket for the authenticated account:
    # open(request, account, key_id)
    open: Callable[[object, object, int | None], None]
    # The DRF throttle that counts the request, or refuses it when the month is used up
    throttle: type
    # The 429 of a refused request, in the API's words: refusal(request) -> ApiError
    refusal: Callable[[object], Exception]
    # For answers on the event loop (config.loop.LoopRoute), the same meter:
    # the ticket `open` attached to a request: ticket_of(request)
    ticket_of: Callable[[object], object]
    # the month was found used up lately (the view answers its 429): refused_lately(ticket)
    refused_lately: Callable[[object], bool]
    # count a served answer of `size` bytes in one statement; False: the month cannot pay
    # for it and nothing was written: count_on_loop(ticket, size) -> Awaitable[bool]
    count_on_loop: Callable[[object, int], Awaitable[bool]]
    # what a request gets when its count failed (it may have been counted: the view must
    # not count it again): unrecorded(request, ticket, exc) -> HttpResponse
    unrecorded: Callable[[object, object, Exception], object]


class _NotInstalled:
    """Fails loudly on first use rather than serving requests nobody counts."""

    def __getattr__(self, name):
        raise ImproperlyConfigured("No metering is installed: the billing app installs it in its "
                                   "AppConfig.ready (config.api.metering.meter_install).")


meter: Meter = _NotInstalled()  # type: ignore[assignment]


def meter_install(installed: Meter) -> None:
    global meter
    meter = installed
