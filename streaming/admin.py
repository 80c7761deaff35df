from django.contrib import admin

from config.admin_display import ms_datetime

from .models import IngestionState, IngestionWorker, StreamSubscription


@admin.register(StreamSubscription)
class StreamSubscriptionAdmin(admin.ModelAdmin):
    list_display = ("__str__", "account", "pair", "trade", "book", "quote", "created_at", "updated_at")
    list_filter = ("pair__exchange", "trade", "book", "quote", "account__plan", ("created_at", admin.DateFieldListFilter))
    search_fields = ("account__name", "account__users__email", "pair__base__symbol", "pair__quote__symbol",
                     "pair__exchange__slug")
    list_select_related = ("account", "pair__exchange", "pair__base", "pair__quote")
    autocomplete_fields = ("account", "pair")


def _moment(field: str, description: str):
    @admin.display(description=description, ordering=field)
    def show(self, state):
        return ms_datetime(getattr(state, field))
    return show


@admin.register(IngestionState)
class IngestionStateAdmin(admin.ModelAdmin):
    list_display = ("pair", "wanted", "cursor", "heartbeat_at", "lease_owner", "lease_until", "handover_to", "fatal",
                    "last_error")
    list_filter = ("wanted", "fatal", "lease_owner")
    search_fields = ("pair__base__symbol", "pair__exchange__slug", "lease_owner")
    list_select_related = ("pair__exchange", "pair__base", "pair__quote")
    readonly_fields = ("cursor", "coverage_from", "heartbeat_at", "trade_seen", "book_seen",
                       "quote_seen", "lease_owner", "lease_until", "handover_to", "handover_ready",
                       "last_error_at", "updated_at")
    fields = ("pair", "wanted", "unwanted_since", "fatal", "last_error") + readonly_fields

    cursor = _moment("cursor_ms", "bars written up to (UTC)")
    coverage_from = _moment("coverage_from_ms", "continuous bars from (UTC)")
    trade_seen = _moment("trade_seen_ms", "last trade (UTC)")
    book_seen = _moment("book_seen_ms", "last book (UTC)")
    quote_seen = _moment("quote_seen_ms", "last quote (UTC)")
    handover_ready = _moment("handover_ready_ms", "handover ready at (UTC)")


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
