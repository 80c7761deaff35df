from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.authentication import SessionAuthentication
from rest_framework.decorators import api_view, authentication_classes, permission_classes
from rest_framework.negotiation import DefaultContentNegotiation

from .errors import NotFound


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
