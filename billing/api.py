from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.response import Response

from config import clock
from .base_views import AccountAPIView
from .permissions import IsAccountKey
from .selectors import iso_utc, usage_month
from .serializers import UsageSerializer


def streamed_pairs(account) -> int:
    """Pairs the account subscribes to now."""
    return account.stream_subscriptions.count()


class UsageView(AccountAPIView):
    """GET /api/v1/me/usage (alias /v1/me/usage): this UTC month's usage. Never counted,
    and still answers when the quota is used up."""

    permission_classes = [IsAccountKey]
    metered = False

    @extend_schema(summary="Monthly usage of the key's account", tags=["account"],
                   responses=UsageSerializer)
    def get(self, request):
        account = request.user.account
        plan = account.plan
        usage = usage_month(account_id=account.pk, now=clock.utcnow())
        return Response({
            "period": {"start": iso_utc(usage.start), "end": iso_utc(usage.end)},
            "plan": plan.name,
            "requests": {"used": usage.requests, "limit": plan.monthly_requests,
                         "remaining": max(plan.monthly_requests - usage.requests, 0)},
            "bytes": {"used": usage.bytes, "limit": plan.monthly_bytes,
                      "remaining": max(plan.monthly_bytes - usage.bytes, 0)},
            "streams": {"pairs": streamed_pairs(account)},
        })


@extend_schema_view(get=extend_schema(exclude=True))
class UsageAliasView(UsageView):
    """GET /v1/me/usage, the alias SPEC.md names: documented once, as /api/v1/me/usage."""
