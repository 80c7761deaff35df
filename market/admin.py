from django.contrib import admin

from .models import Asset, Exchange, Pair


class PairInline(admin.TabularInline):
    model = Pair
    fk_name = "exchange"
    fields = ("base", "quote", "streamable")
    autocomplete_fields = ("base", "quote")
    extra = 0


@admin.register(Exchange)
class ExchangeAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "source", "ccxt_id", "is_active", "pair_count")
    list_filter = ("source", "is_active")
    search_fields = ("slug", "name")
    inlines = [PairInline]

    @admin.display(description="pairs")
    def pair_count(self, exchange):
        return exchange.pairs.count()


@admin.register(Asset)
class AssetAdmin(admin.ModelAdmin):
    list_display = ("symbol", "name", "market_cap_rank", "market_cap_usd", "circulating_supply", "ranked_at")
    search_fields = ("symbol", "name")
    ordering = ("market_cap_rank", "symbol")


@admin.register(Pair)
class PairAdmin(admin.ModelAdmin):
    list_display = ("__str__", "exchange", "base", "quote", "streamable", "created_at")
    list_filter = ("exchange", "streamable")
    search_fields = ("base__symbol", "quote__symbol", "exchange__slug")
    autocomplete_fields = ("base", "quote")
    list_select_related = ("exchange", "base", "quote")
