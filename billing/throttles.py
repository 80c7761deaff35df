"""The monthly quota through DRF's own extension point: a throttle that counts the request
(or refuses it) and tells DRF how long to wait, which becomes Retry-After."""

from rest_framework.throttling import BaseThrottle

from config import clock

from . import metering, tickets, usage


class MonthlyQuota(BaseThrottle):
    """Counts an authenticated request against its account's month, atomically
    (billing.metering.count_request); refuses it once the month's requests or bytes are
    used up. Views that are free (`metered = False`, /me/usage) are never counted; views
    `counted_when_served` are counted as their answer leaves (billing.metering.count_served)."""

    def allow_request(self, request, view) -> bool:
        self.ticket = tickets.ticket_of(request)
        if self.ticket is None or not getattr(view, "metered", True):
            return True
        if getattr(view, "counted_when_served", False):
            # counted with its body in one statement as it leaves (MeteringMiddleware),
            # refused here only when this process saw the month used up a moment ago
            if metering.refused_lately(self.ticket):
                usage.read_month(self.ticket)
                return False
            self.ticket.count_when_served = True
            return True
        return metering.count_request(self.ticket)

    def wait(self) -> float:
        return max((self.ticket.resets_at - clock.utcnow()).total_seconds(), 1.0)
