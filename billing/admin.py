from django.contrib import admin

from config.admin_display import count, money, ms_datetime, size

from .models import KeyEndpointUsage, PairBillingPeriod, Plan, StripeCustomer, StripeEvent, UsageCounter


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    list_display = ("name", "has_api", "has_streaming", "requests_quota", "bytes_quota", "pair_price",
                    "monthly_price", "stripe_price_id", "is_public", "account_count", "updated_at")
    list_editable = ("has_api", "has_streaming")
    search_fields = ("name",)
    readonly_fields = ("created_at", "updated_at")

    @admin.display(description="monthly requests", ordering="monthly_requests")
    def requests_quota(self, plan):
        return count(plan.monthly_requests)

    @admin.display(description="monthly bytes", ordering="monthly_bytes")
    def bytes_quota(self, plan):
        return size(plan.monthly_bytes)

    @admin.display(description="price per pair-month", ordering="pair_price_usd")
    def pair_price(self, plan):
        return money(plan.pair_price_usd)

    @admin.display(description="price a month", ordering="monthly_price_usd")
    def monthly_price(self, plan):
        return money(plan.monthly_price_usd)

    @admin.display(description="accounts")
    def account_count(self, plan):
        return plan.accounts.count()


class ReadOnlyAdmin(admin.ModelAdmin):
    """Figures written by the service only (counters, the billing ledger): staff look, never
    add, edit or delete."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class CountedFigures:
    """The requests and bytes of a usage row (`requests`, `bytes`), formatted."""

    @admin.display(description="requests", ordering="requests")
    def request_count(self, usage):
        return count(usage.requests)

    @admin.display(description="bytes served", ordering="bytes")
    def served(self, usage):
        return size(usage.bytes)


@admin.register(PairBillingPeriod)
class PairBillingPeriodAdmin(ReadOnlyAdmin):
    list_display = ("__str__", "account", "pair", "metrics", "started_at", "ended_at")
    list_filter = (("ended_at", admin.EmptyFieldListFilter), "pair__exchange", "account__plan")
    search_fields = ("account__name", "account__users__email", "pair__base__symbol", "pair__quote__symbol")
    date_hierarchy = "started_at"
    list_select_related = ("account", "pair__exchange", "pair__base", "pair__quote")


@admin.register(UsageCounter)
class UsageCounterAdmin(CountedFigures, ReadOnlyAdmin):
    list_display = ("__str__", "account", "period", "period_start", "request_count", "served")
    list_filter = ("period", "account__plan")
    search_fields = ("account__name", "account__users__email")
    date_hierarchy = "period_start"
    list_select_related = ("account",)
    fields = ("account", "period", "period_start", "request_count", "served")
    readonly_fields = fields


@admin.register(KeyEndpointUsage)
class KeyEndpointUsageAdmin(CountedFigures, ReadOnlyAdmin):
    list_display = ("__str__", "account", "api_key", "endpoint", "month_label", "request_count", "served",
                    "last_request")
    list_filter = ("endpoint", "month", "account__plan")
    search_fields = ("account__name", "account__users__email", "api_key__name", "api_key__lookup_id", "endpoint")
    list_select_related = ("account", "api_key")
    fields = ("account", "api_key", "endpoint", "month_label", "request_count", "served", "last_request")
    readonly_fields = fields

    @admin.display(description="month", ordering="month")
    def month_label(self, usage):
        return f"{usage.month:%Y-%m}"

    @admin.display(description="last counted request (UTC)", ordering="last_request_ms")
    def last_request(self, usage):
        return ms_datetime(usage.last_request_ms)


@admin.register(StripeCustomer)
class StripeCustomerAdmin(admin.ModelAdmin):
    """Who pays for an account in Stripe; written by the webhooks only."""

    list_display = ("account", "customer_id", "subscription_id", "standing_as_of", "updated_at")
    search_fields = ("account__name", "account__users__email", "customer_id", "subscription_id")
    readonly_fields = ("account", "customer_id", "subscription_id", "standing_as_of", "created_at", "updated_at")

    def has_add_permission(self, request):
        return False


@admin.register(StripeEvent)
class StripeEventAdmin(ReadOnlyAdmin):
    """The Stripe events received, each applied once."""

    list_display = ("received_at", "type", "account", "outcome", "event_id")
    list_filter = ("type",)
    search_fields = ("event_id", "account__name", "account__users__email")
    list_select_related = ("account",)
