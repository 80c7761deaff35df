"""Who may call what: a live key, then the plan's features (API.md "Keys and plans")."""

from rest_framework.permissions import BasePermission

from config.api.errors import PlanForbidden, Unauthorized

from .selectors import streaming_plan_refusal


def _account(request):
    caller = request.user
    if caller is None or not getattr(caller, "is_authenticated", False):
        if "api_key" in request.query_params:  # the usual mistake: say what to do instead
            raise Unauthorized("An API key is read from the Authorization header only, never from the query "
                               "string: send 'Authorization: Bearer <API_KEY>' and drop ?api_key=.",
                               details={"parameter": "api_key"})
        raise Unauthorized()
    account = caller.account
    if account is None:
        raise Unauthorized("The API key's account no longer exists.")
    return account


class IsAccountKey(BasePermission):
    """Any live key, whatever the plan (GET /me/usage)."""

    def has_permission(self, request, view) -> bool:
        _account(request)
        return True


class HasApiAccess(BasePermission):
    plan_feature = "api"
    def has_permission(self, request, view) -> bool:
        if not _account(request).plan.has_api:
            raise PlanForbidden("The account's plan does not include API access; "
                                "upgrade to Pro or Enterprise.")
        return True


class HasStreamingAccess(BasePermission):
    plan_feature = "streaming"
    def has_permission(self, request, view) -> bool:
        refusal = streaming_plan_refusal(_account(request))
        if refusal is not None:
            raise refusal
        return True
