from django.contrib import admin

from .models import Plan


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    list_display = ("name", "has_api", "has_streaming", "monthly_requests", "monthly_bytes",
                    "pair_price_usd", "account_count", "updated_at")
    list_editable = ("has_api", "has_streaming", "monthly_requests", "monthly_bytes", "pair_price_usd")
    search_fields = ("name",)
    readonly_fields = ("created_at", "updated_at")

    @admin.display(description="accounts")
    def account_count(self, plan):
        return plan.accounts.count()


from .models import PairBillingPeriod, UsageCounter  # noqa: E402


@admin.register(PairBillingPeriod)
class PairBillingPeriodAdmin(admin.ModelAdmin):
    list_display = ("account", "pair", "metrics", "started_at", "ended_at")
    list_filter = (("ended_at", admin.EmptyFieldListFilter), "pair__exchange")
    search_fields = ("account__name", "account__users__email", "pair__base__symbol")
    date_hierarchy = "started_at"
    list_select_related = ("account", "pair__exchange", "pair__base", "pair__quote")

    def has_change_permission(self, request, obj=None):
        return False  # the ledger is written by subscriptions only

    def has_add_permission(self, request):
        return False


@admin.register(UsageCounter)
class UsageCounterAdmin(admin.ModelAdmin):
    list_display = ("account", "period", "period_start", "requests", "bytes")
    list_filter = ("period",)
    search_fields = ("account__name", "account__users__email")
    date_hierarchy = "period_start"

    def has_change_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request):
        return False


from .models import StripeCustomer, StripeEvent  # noqa: E402

PlanAdmin.list_display = (*PlanAdmin.list_display[:-2], "monthly_price_usd", "stripe_price_id", "is_public",
                          *PlanAdmin.list_display[-2:])


@admin.register(StripeCustomer)
class StripeCustomerAdmin(admin.ModelAdmin):
    """Who pays for an account in Stripe; written by the webhooks only."""

    list_display = ("account", "customer_id", "subscription_id", "standing_as_of", "updated_at")
    search_fields = ("account__name", "account__users__email", "customer_id", "subscription_id")
    readonly_fields = ("account", "customer_id", "subscription_id", "standing_as_of", "created_at", "updated_at")

    def has_add_permission(self, request):
        return False


@admin.register(StripeEvent)
class StripeEventAdmin(admin.ModelAdmin):
    """The Stripe events received, each applied once."""

    list_display = ("received_at", "type", "account", "outcome", "event_id")
    list_filter = ("type",)
    search_fields = ("event_id", "account__name", "account__users__email")
    list_select_related = ("account",)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
