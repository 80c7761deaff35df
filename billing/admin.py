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
