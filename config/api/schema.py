"""The OpenAPI description shared by every endpoint: the error envelope, the quota and
request-id headers, and the errors each kind of endpoint can answer with."""

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse
from rest_framework import serializers


class ErrorBodySerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Stable machine-readable code, e.g. invalid_parameter")
    message = serializers.CharField(help_text="A human sentence")
    details = serializers.DictField(help_text="Always an object; names the parameter for a bad one")
    request_id = serializers.CharField(help_text="Same as the X-Request-Id header")


class ErrorSerializer(serializers.Serializer):
    error = ErrorBodySerializer()

    class Meta:
        ref_name = "Error"


QUOTA_HEADERS = {
    "X-Quota-Requests-Limit": "Requests allowed this UTC month",
    "X-Quota-Requests-Used": "Requests counted this month, this one included",
    "X-Quota-Requests-Remaining": "Requests left this month",
    "X-Quota-Bytes-Limit": "Response bytes allowed this UTC month",
    "X-Quota-Bytes-Used": "Response bytes counted this month, this body included",
    "X-Quota-Bytes-Remaining": "Response bytes left this month",
    "X-Quota-Reset": "Epoch seconds of the next UTC month, when both counters reset",
}

ERRORS = {
    "400": "invalid_parameter (a bad or missing parameter, an unknown format) or invalid_json",
    "401": "unauthorized: no, malformed, unknown or revoked API key",
    "403": "plan_forbidden: the plan lacks the feature",
    "404": "not_found",
    "415": "unsupported_media_type: Accept admits neither application/json nor application/toon",
    "429": "quota_exceeded: the monthly budget was used up; see Retry-After and details.resets_at",
    "500": "internal_error",
}


PATH_PARAMETERS = {
    "exchange": ("Exchange id, lower case", "binance"),
    "base": ("Base asset symbol", "BTC"),
    "quote": ("Quote asset symbol", "USDT"),
}


BODY_METHODS = ("POST", "PUT", "PATCH")


class ApiAutoSchema(AutoSchema):
    """Requests are described by the input serializers the views validate with
    (`AccountAPIView.inputs`): the body of a POST, the query string of the others."""

    def _input_serializer(self):
        return getattr(self.view, "inputs", {}).get(self.method)

    def get_request_serializer(self):
        serializer = self._input_serializer()
        if serializer is not None and self.method in BODY_METHODS:
            return serializer
        return super().get_request_serializer()

    def get_serializer_name(self, serializer, direction):
        # drf-spectacular adds "Request" to request components itself: SeriesRequest, not
        # SeriesRequestRequest
        name = super().get_serializer_name(serializer, direction)
        return name.removesuffix("Request") if direction == "request" else name

    def get_override_parameters(self):
        """The query serializer's fields, and every path parameter described with a value that
        works in the explorer."""
        parameters = list(super().get_override_parameters())
        serializer = self._input_serializer()
        if serializer is not None and self.method not in BODY_METHODS:
            parameters.append(serializer)
        for name, (description, example) in PATH_PARAMETERS.items():
            if "{" + name + "}" in self.path:
                parameters.append(OpenApiParameter(name, str, OpenApiParameter.PATH, description=description,
                                                   examples=[OpenApiExample(example, value=example)]))
        return parameters

    def _error_codes(self) -> list[str]:
        codes = ["400", "415", "500"]
        if self.view.authentication_classes:
            codes.append("401")
        if any(getattr(p, "plan_feature", None) for p in self.view.permission_classes):
            codes.append("403")
        if "{" in self.path:
            codes.append("404")
        if getattr(self.view, "metered", False):
            codes.append("429")
        return sorted(codes)

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        for code in self._error_codes():
            if code not in responses:
                responses[code] = self._get_response_for_code(
                    OpenApiResponse(ErrorSerializer, description=ERRORS[code]), code, direction=direction)
        return responses

    def _get_response_headers_for_code(self, status_code, direction="response"):
        headers = super()._get_response_headers_for_code(status_code, direction)
        headers["X-Request-Id"] = {"schema": {"type": "string"},
                                   "description": "Identifies the request in our logs"}
        if self.view.authentication_classes and status_code != "401":
            for name, description in QUOTA_HEADERS.items():
                headers[name] = {"schema": {"type": "integer"}, "description": description}
        if status_code == "429":
            headers["Retry-After"] = {"schema": {"type": "integer"},
                                      "description": "Seconds until the next UTC month"}
        return headers
