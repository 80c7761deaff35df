"""The base of every API endpoint that takes a key: authenticate, open the metering
ticket, check the plan, count the request (or refuse it with 429), then answer an unknown
format. Refused requests (401, 403, 429) are never counted; everything after, a 400
included, is."""

from rest_framework.views import APIView

from config.api.params import RequestSerializer, refuse_unknown_fields

from . import metering
from .throttles import MonthlyQuota


BODY_METHODS = ("POST", "PUT", "PATCH")


class AccountAPIView(APIView):
    throttle_classes = [MonthlyQuota]
    metered = True  # False: authenticated but free (/me/usage)
    # True for views that only read and never stream their body: the request is counted
    # with its body in one statement as the answer leaves, instead of one statement before
    # the view and one after (docs/METERING.md)
    counted_when_served = False
    # The input of each method: the JSON body of POST, the query string of the others. The
    # serializer validates the request (`read_input`) and describes it in the OpenAPI
    # document (config.api.schema); any field it does not declare is refused with a 400
    # naming it, as is any query parameter of a POST (`format` is taken everywhere).
    inputs: dict[str, type[RequestSerializer]] = {}

    def perform_content_negotiation(self, request, force=False):
        """An unknown format is answered only once the request is authenticated, allowed
        and counted (a 400 counts; a 401 or 403 wins over it): DRF negotiates first, so
        its error waits here and `initial` raises it after the checks; meanwhile the
        first renderer stands in, as DRF does for errors."""
        try:
            return super().perform_content_negotiation(request, force)
        except Exception as exc:
            if force:
                raise
            self.negotiation_error = exc
            return super().perform_content_negotiation(request, force=True)

    def perform_authentication(self, request):
        super().perform_authentication(request)
        caller = request.user
        if caller is not None and caller.account is not None:
            metering.attach(request, metering.open_ticket(account=caller.account, key_id=caller.key_id,
                                                          endpoint=metering.endpoint_of(request)))

    def initial(self, request, *args, **kwargs):
        self.negotiation_error = None
        super().initial(request, *args, **kwargs)  # MonthlyQuota counts the request, or refuses it
        if self.negotiation_error is not None:
            raise self.negotiation_error
        method = request.method
        if not hasattr(self, method.lower()):
            return  # answered 405 by the dispatch
        serializer = self.inputs.get(method)
        takes_body = method in BODY_METHODS
        refuse_unknown_fields(request.query_params, serializer._declared_fields if serializer and not takes_body
                              else (), where="query")
        if serializer and takes_body:
            refuse_unknown_fields(request.data, serializer._declared_fields, where="body")

    def read_input(self, request) -> dict:
        """The validated input of this request's method (a 400 naming the first bad field)."""
        data = request.data if request.method in BODY_METHODS else request.query_params
        return self.inputs[request.method].read(data)

    def throttled(self, request, wait):
        """429 in the API's words: which quota is used up and when it resets."""
        raise metering.quota_refusal(metering.ticket_of(request))
