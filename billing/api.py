from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from .permissions import IsAccountKey
from .selectors import iso_utc, month_bounds
from .serializers import UsageSerializer


class UsageView(APIView):
    """GET /api/v1/me/usage: this UTC month's usage of the key's account. Free of quota."""

    permission_classes = [IsAccountKey]

    @extend_schema(summary="Monthly usage of the key's account", tags=["account"],
                   responses=UsageSerializer)
    def get(self, request):
        account = request.user.account
        plan = account.plan
        start, end = month_bounds(timezone.now())
        requests_used, bytes_used = 0, 0
        return Response({
            "period": {"start": iso_utc(start), "end": iso_utc(end)},
            "plan": plan.name,
            "requests": {"used": requests_used, "limit": plan.monthly_requests,
                         "remaining": max(plan.monthly_requests - requests_used, 0)},
            "bytes": {"used": bytes_used, "limit": plan.monthly_bytes,
                      "remaining": max(plan.monthly_bytes - bytes_used, 0)},
            "streams": {"pairs": 0},
        })
