"""OpenAPI description of the Bearer key scheme (loaded with accounts.authentication)."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "accounts.authentication.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "mdp_live_ + 50 base62 characters",
            "description": "Create keys on the API keys page after signing in. "
                           "Send `Authorization: Bearer mdp_live_...`.",
        }
