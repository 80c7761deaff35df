from django.contrib import admin

from .models import SchemeEvent


@admin.register(SchemeEvent)
class SchemeEventAdmin(admin.ModelAdmin):
    list_display = ("pair", "scheme", "side", "direction", "confidence", "alert_score", "ts_ms")
    list_filter = ("scheme", "side", "direction", "pair__exchange")
    search_fields = ("pair__base__symbol",)
    list_select_related = ("pair__exchange", "pair__base", "pair__quote")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
