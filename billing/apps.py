from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"
    verbose_name = "Billing: plans, payment and usage"

    def ready(self):
        from config.api.metering import Meter, meter_install

        from . import receivers  # noqa: F401  gives new sign-ups their plan
        from .metering import count_served_on_loop, refused_lately, request_refusal
        from .tickets import ticket_attach, ticket_of
        from .middleware import unmetered_refusal
        from .throttles import MonthlyQuota

        # The API base view (config.api.views.AccountAPIView) and the answers on the event
        # loop that stand in for it count every request through this: plans and counters
        # are billing's, the view is below every app.
        meter_install(Meter(open=ticket_attach, throttle=MonthlyQuota, refusal=request_refusal, ticket_of=ticket_of,
                            refused_lately=refused_lately, count_on_loop=count_served_on_loop,
                            unrecorded=unmetered_refusal))
