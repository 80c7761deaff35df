from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.authentication import SessionAuthentication
from rest_framework.decorators import api_view, authentication_classes, permission_classes
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.views import APIView

from . import metering
from .errors import NotFound
from .params import RequestSerializer, refuse_unknown_fields

BODY_METHODS = ("POST", "PUT", "PATCH")


class AccountAPIView(APIView):
    """The base of every API endpoint that takes a key: authenticate, open the metering
    ticket, check the plan, count the request (or refuse it with 429), then answer an
    unknown format. Refused requests (401, 403, 429) are never counted; everything after, a
    400 included, is. The counting is billing's, through the hook it installs
    (config.api.metering)."""

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

    def get_throttles(self):
        return [metering.meter.throttle()]

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
            metering.meter.open(request, caller.account, caller.key_id)

    def initial(self, request, *args, **kwargs):
        self.negotiation_error = None
        super().initial(request, *args, **kwargs)  # the meter's throttle counts the request, or refuses it
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
        raise metering.meter.refusal(request)


@extend_schema(exclude=True)
@api_view(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
@authentication_classes([])
@permission_classes([])
def unknown_api_path(request, rest=""):
    """Any path under the API that no route matches."""
    raise NotFound(f"No endpoint at {request.path}.")


class SchemaView(SpectacularAPIView):
    """The OpenAPI document: public, negotiated the ordinary way (JSON or YAML)."""

    content_negotiation_class = DefaultContentNegotiation


class ExplorerView(SpectacularSwaggerView):
    """Swagger UI with our bar (the way back, the key) and plugin (code samples, no "Try it
    out" for a stream): templates/api/explorer.html, static/js/explorer.js."""

    content_negotiation_class = DefaultContentNegotiation
    template_name = "api/explorer.html"
    authentication_classes = [SessionAuthentication]  # the site's sign-in, to offer the customer's keys

    @extend_schema(exclude=True)
    def get(self, request, *args, **kwargs):
        # drf-spectacular opens this page to cross-origin openers (for OAuth2 pop-ups, which
        # we do not use); it is where users paste their API key, so isolate it like our pages.
        response = super().get(request, *args, **kwargs)
        response["Cross-Origin-Opener-Policy"] = "same-origin"
        signed_in = bool(getattr(request.user, "is_authenticated", False))
        response.data["explorer_config"] = {"schema_url": response.data["schema_url"], "signed_in": signed_in}
        response.data["explorer_keys"] = self.keys_of(request.user) if signed_in else []
        return response

    def keys_of(self, user) -> list:
        """The signed-in user's live keys to choose from (name, lookup id, display prefix);
        the wiring above this layer fills it in (config.explorer)."""
        return []


def handler404(request, exception=None):
    """Django's 404 for anything no route matched: the envelope on API paths, a page elsewhere."""
    from django.views.defaults import page_not_found

    from .errors import NotFound as NotFoundError
    from .middleware import error_response, is_api_path

    if is_api_path(request.path):
        return error_response(request, NotFoundError(f"No endpoint at {request.path}."))
    return page_not_found(request, exception)


def handler500(request):
    from django.views.defaults import server_error

    from .errors import InternalError
    from .middleware import error_response, is_api_path

    if is_api_path(request.path):
        return error_response(request, InternalError())
    return server_error(request)
