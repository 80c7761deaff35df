from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts and API keys"

    def ready(self):
        from . import schema  # noqa: F401  registers the OpenAPI security scheme
