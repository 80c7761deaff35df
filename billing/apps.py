from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"
    verbose_name = "Billing: plans, payment and usage"

    def ready(self):
        from . import receivers  # noqa: F401  gives new sign-ups their plan
