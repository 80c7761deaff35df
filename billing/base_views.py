"""The base of every API endpoint that takes a key: authenticate, open the metering
ticket, check the plan, count the request (or refuse it with 429), then negotiate the
format. Refused requests (401, 403, 429) are never counted; everything after, a 400
included, is."""

from rest_framework.views import APIView

from config import clock
from config.api.errors import QuotaExceeded
from config.api.params import refuse_unknown_fields

from . import metering
from .selectors import iso_utc


class AccountAPIView(APIView):
    metered = True  # False: authenticated but free (/me/usage)
    # The fields each method takes; any other is refused with a 400 naming it (a typo must
    # never silently change the answer). `format` is taken everywhere.
    body_fields: dict[str, tuple[str, ...]] = {}  # method -> JSON body fields
    query_fields: dict[str, tuple[str, ...]] = {}  # method -> query parameters

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
        method = request.method
        if not hasattr(self, method.lower()):
            return  # answered 405 by the dispatch
        refuse_unknown_fields(request.query_params, self.query_fields.get(method, ()), where="query")
        if method in self.body_fields:
            refuse_unknown_fields(request.data, self.body_fields[method], where="body")

    def _count(self, ticket: metering.Ticket) -> None:
        if metering.count_request(ticket):
            return
        resets_at = iso_utc(ticket.resets_at)
        retry_after = max(int((ticket.resets_at - clock.utcnow()).total_seconds()), 1)
        used = ("requests" if ticket.requests_used >= ticket.requests_limit else "bytes")
        raise QuotaExceeded(
            f"The monthly {used} quota of the account's plan is used up; it resets at {resets_at}.",
            details={"resets_at": resets_at, "exhausted": used},
            headers={"Retry-After": str(retry_after)})
