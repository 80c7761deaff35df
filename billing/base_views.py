"""The base of every API endpoint that takes a key: authenticate, open the metering
ticket, check the plan, count the request (or refuse it with 429), then negotiate the
format. Refused requests (401, 403, 429) are never counted; everything after, a 400
included, is."""

from rest_framework.views import APIView

from config.api.errors import QuotaExceeded

from . import metering
from .selectors import iso_utc


class AccountAPIView(APIView):
    metered = True  # False: authenticated but free (/me/usage)

    def initial(self, request, *args, **kwargs):
        self.format_kwarg = self.get_format_suffix(**kwargs)
        self.perform_authentication(request)
        caller = request.user
        if caller is not None and caller.account is not None:
            request._request.metering = metering.open_ticket(account=caller.account)
        self.check_permissions(request)
        self.check_throttles(request)
        if self.metered:
            self._count(request._request.metering)
        neg = self.perform_content_negotiation(request)
        request.accepted_renderer, request.accepted_media_type = neg
        version, scheme = self.determine_version(request, *args, **kwargs)
        request.version, request.versioning_scheme = version, scheme

    def _count(self, ticket: metering.Ticket) -> None:
        if metering.count_request(ticket):
            return
        resets_at = iso_utc(ticket.resets_at)
        retry_after = max(int((ticket.resets_at - metering.clock.utcnow()).total_seconds()), 1)
        used = ("requests" if ticket.requests_used >= ticket.requests_limit else "bytes")
        raise QuotaExceeded(
            f"The monthly {used} quota of the account's plan is used up; it resets at {resets_at}.",
            details={"resets_at": resets_at, "exhausted": used},
            headers={"Retry-After": str(retry_after)})
