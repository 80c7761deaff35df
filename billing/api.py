from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.response import Response

from accounts import keys
from config import loop
from config.api.renderers import RENDER
from config.api.views import AccountAPIView

from . import tickets, usage
from .permissions import IsAccountKey
from .selectors import iso_utc, iso_utc_ms
from .serializers import UsageSerializer


def usage_document(plan, month: tickets.Ticket, read: usage.UsageRead) -> dict:
    """The body of /me/usage: `month` holds the counters read with the rest (`read`)."""
    return {
        "period": {"start": iso_utc(month.month_starts_at), "end": iso_utc(month.resets_at)},
        "plan": plan.name,
        "requests": {"used": month.requests_used, "limit": plan.monthly_requests,
                     "remaining": max(plan.monthly_requests - month.requests_used, 0)},
        "bytes": {"used": month.bytes_used, "limit": plan.monthly_bytes,
                  "remaining": max(plan.monthly_bytes - month.bytes_used, 0)},
        "streams": {"pairs": read.streamed_pairs},
        "by_key_and_endpoint": [
            {"key": keys.display_prefix(count.key_lookup_id), "key_name": count.key_name,
             "key_revoked": count.key_revoked, "endpoint": count.endpoint, "requests": count.requests,
             "bytes": count.bytes, "last_request_at": iso_utc_ms(count.last_request_ms)}
            for count in read.per_key_endpoint],
    }


class UsageView(AccountAPIView):
    """GET /api/v1/me/usage (alias /v1/me/usage): this UTC month's usage. Never counted,
    and still answers when the quota is used up. Its plain case is served on the event loop
    (`usage_on_loop`); this view answers everything else."""

    permission_classes = [IsAccountKey]
    metered = False

    @extend_schema(summary="Monthly usage of the key's account", tags=["account"],
                   responses=UsageSerializer)
    def get(self, request):
        # the month's counters, read once: the quota headers of this answer show the same
        month = tickets.ticket_of(request)
        read = usage.read_usage(month)
        return Response(usage_document(request.user.account.plan, month, read))


@extend_schema_view(get=extend_schema(exclude=True))
class UsageAliasView(UsageView):
    """GET /v1/me/usage, the alias SPEC.md names: documented once, as /api/v1/me/usage."""


async def _usage_body(call: loop.LoopCall) -> bytes:
    """`UsageView`'s body, from the month's counters read on the event loop."""
    read = await usage.read_usage_on_loop(call.ticket)
    return RENDER[call.format](usage_document(call.caller.account.plan, call.ticket, read))


# The plain GET by a key and account this process holds, answered on the event loop
# (config/loop.py reads the rest from the views)
usage_on_loop = loop.LoopRoute(UsageView, _usage_body)
usage_alias_on_loop = loop.LoopRoute(UsageAliasView, _usage_body)
