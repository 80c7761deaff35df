from django.contrib import admin

from config.admin_display import count, money, ms_datetime

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
    readonly_fields = ("replay_loop_from",)

    @admin.display(description="pairs")
    def pair_count(self, exchange):
        return exchange.pairs.count()

    @admin.display(description="replay loop from (UTC)")
    def replay_loop_from(self, exchange):
        return ms_datetime(exchange.replay_loop_from_ms)


@admin.register(Asset)
class AssetAdmin(admin.ModelAdmin):
    list_display = ("symbol", "name", "market_cap_rank", "market_cap", "supply", "ranked_at")
    search_fields = ("symbol", "name")
    ordering = ("market_cap_rank", "symbol")

    @admin.display(description="market cap", ordering="market_cap_usd")
    def market_cap(self, asset):
        return money(asset.market_cap_usd)

    @admin.display(description="circulating supply", ordering="circulating_supply")
    def supply(self, asset):
        return count(asset.circulating_supply)


@admin.register(Pair)
class PairAdmin(admin.ModelAdmin):
    list_display = ("__str__", "exchange", "base", "quote", "streamable", "created_at")
    list_filter = ("exchange", "streamable")
    search_fields = ("base__symbol", "quote__symbol", "exchange__slug")
    autocomplete_fields = ("base", "quote")
    list_select_related = ("exchange", "base", "quote")
