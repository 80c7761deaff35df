from django.contrib import admin

from .models import IngestionState, IngestionWorker, StreamSubscription


@admin.register(StreamSubscription)
class StreamSubscriptionAdmin(admin.ModelAdmin):
    list_display = ("account", "pair", "trade", "book", "quote", "created_at", "updated_at")
    list_filter = ("pair__exchange", "trade", "book", "quote")
    search_fields = ("account__name", "account__users__email", "pair__base__symbol")
    list_select_related = ("account", "pair__exchange", "pair__base", "pair__quote")
    raw_id_fields = ("account", "pair")


@admin.register(IngestionState)
class IngestionStateAdmin(admin.ModelAdmin):
    list_display = ("pair", "wanted", "cursor_ms", "heartbeat_at", "lease_owner", "lease_until", "handover_to", "fatal",
                    "last_error")
    list_filter = ("wanted", "fatal", "lease_owner")
    search_fields = ("pair__base__symbol", "pair__exchange__slug", "lease_owner")
    list_select_related = ("pair__exchange", "pair__base", "pair__quote")
    readonly_fields = ("cursor_ms", "coverage_from_ms", "heartbeat_at", "trade_seen_ms", "book_seen_ms",
                       "quote_seen_ms", "lease_owner", "lease_until", "handover_to", "handover_ready_ms",
                       "last_error_at", "updated_at")
    fields = ("pair", "wanted", "unwanted_since", "fatal", "last_error") + readonly_fields


@admin.register(IngestionWorker)
class IngestionWorkerAdmin(admin.ModelAdmin):
    """The ingestion processes: each holds its fair share of the wanted pairs (read-only)."""

    list_display = ("owner", "pairs_held", "started_at", "seen_at")
    search_fields = ("owner",)
    readonly_fields = ("owner", "started_at", "seen_at")

    @admin.display(description="pairs held")
    def pairs_held(self, worker):
        return IngestionState.objects.filter(lease_owner=worker.owner).count()

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
