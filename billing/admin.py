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
