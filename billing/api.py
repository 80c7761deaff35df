from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.response import Response

from . import metering
from .base_views import AccountAPIView
from .permissions import IsAccountKey
from .selectors import iso_utc
from .serializers import UsageSerializer


class UsageView(AccountAPIView):
    """GET /api/v1/me/usage (alias /v1/me/usage): this UTC month's usage. Never counted,
    and still answers when the quota is used up."""

    permission_classes = [IsAccountKey]
    metered = False

    @extend_schema(summary="Monthly usage of the key's account", tags=["account"],
                   responses=UsageSerializer)
    def get(self, request):
        plan = request.user.account.plan
        # the month's counters, read once: the quota headers of this answer show the same
        month = metering.ticket_of(request)
        streamed_pairs = metering.read_usage(month)
        return Response({
            "period": {"start": iso_utc(month.month_starts_at), "end": iso_utc(month.resets_at)},
            "plan": plan.name,
            "requests": {"used": month.requests_used, "limit": plan.monthly_requests,
                         "remaining": max(plan.monthly_requests - month.requests_used, 0)},
            "bytes": {"used": month.bytes_used, "limit": plan.monthly_bytes,
                      "remaining": max(plan.monthly_bytes - month.bytes_used, 0)},
            "streams": {"pairs": streamed_pairs},
        })


@extend_schema_view(get=extend_schema(exclude=True))
class UsageAliasView(UsageView):
    """GET /v1/me/usage, the alias SPEC.md names: documented once, as /api/v1/me/usage."""
