from datetime import timedelta

from django.contrib import admin

from config import clock
from config.admin_display import ms_datetime

from .models import SchemeEvent


class DetectedWithin(admin.SimpleListFilter):
    """Detection time is epoch ms (the API's unit): filter it by how recent it is."""

    title = "detected"
    parameter_name = "detected_within"
    WINDOWS = {"1h": ("the last hour", timedelta(hours=1)), "24h": ("the last 24 hours", timedelta(hours=24)),
               "7d": ("the last 7 days", timedelta(days=7)), "30d": ("the last 30 days", timedelta(days=30))}

    def lookups(self, request, model_admin):
        return [(key, label) for key, (label, _) in self.WINDOWS.items()]

    def queryset(self, request, queryset):
        window = self.WINDOWS.get(self.value())
        if window is None:
            return queryset
        return queryset.filter(ts_ms__gte=int((clock.utcnow() - window[1]).timestamp() * 1000))


@admin.register(SchemeEvent)
class SchemeEventAdmin(admin.ModelAdmin):
    list_display = ("pair", "scheme", "side", "direction", "confidence", "alert_score", "detected_at")
    list_filter = (DetectedWithin, "scheme", "side", "direction", "pair__exchange")
    search_fields = ("pair__base__symbol", "pair__quote__symbol", "pair__exchange__slug", "scheme")
    list_select_related = ("pair__exchange", "pair__base", "pair__quote")
    fields = ("pair", "scheme", "side", "direction", "price", "confidence", "alert_score", "detected_at",
              "build_started_at", "after_bar_at", "build", "collapse")
    readonly_fields = fields

    @admin.display(description="detected (UTC)", ordering="ts_ms")
    def detected_at(self, event):
        return ms_datetime(event.ts_ms)

    @admin.display(description="build started (UTC)", ordering="build_start_ms")
    def build_started_at(self, event):
        return ms_datetime(event.build_start_ms)

    @admin.display(description="sent after the bar of (UTC)")
    def after_bar_at(self, event):
        return ms_datetime(event.after_bar_ms) if event.after_bar_ms else None

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
