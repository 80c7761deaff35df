from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"
    verbose_name = "Billing: plans, payment and usage"

    def ready(self):
        from config.api.metering import Meter, meter_install

        from . import receivers  # noqa: F401  gives new sign-ups their plan
        from .metering import request_refusal, ticket_attach
        from .throttles import MonthlyQuota

        # The API base view (config.api.views.AccountAPIView) counts every request through
        # this: plans and counters are billing's, the view is below every app.
        meter_install(Meter(open=ticket_attach, throttle=MonthlyQuota, refusal=request_refusal))
