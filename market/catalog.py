"""The catalog from the exchange: its spot markets through ccxt's unified market list.

`exchange_markets(exchange)` asks the exchange (ccxt `fetch_markets`, spot only; the REST
base URL can be pointed elsewhere with BINANCE_REST_URL / COINBASE_REST_URL);
`catalog_sync(exchange=, markets=)` records them: each pair's price increment (tick),
amount increment (step), minimum size and trading status. Pairs the exchange no longer
lists become delisted (not streamable); nothing is deleted. Idempotent."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from django.conf import settings
from django.db import transaction

from .models import Exchange, Pair
from .services import asset_ensure

# ccxt's class for an exchange's public market list, where it is not the exchange's own id
MARKET_CLIENTS = {"coinbase": "coinbaseexchange"}
REST_OVERRIDES = {"binance": ("https://api.binance.com", "BINANCE_REST_URL"),
                  "coinbaseexchange": ("https://api.exchange.coinbase.com", "COINBASE_REST_URL")}


class CatalogError(Exception):
    pass


@dataclass
class CatalogSync:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: int = 0
    delisted: list[str] = field(default_factory=list)


def _client(exchange: Exchange):
    import ccxt

    name = MARKET_CLIENTS.get(exchange.ccxt_id or exchange.slug, exchange.ccxt_id or exchange.slug)
    cls = getattr(ccxt, name, None)
    if cls is None:
        raise CatalogError(f"ccxt has no exchange {name!r}")
    client = cls({"enableRateLimit": False, "timeout": 20_000,
                  "options": {"fetchMarkets": {"types": ["spot"]}, "defaultType": "spot"}})
    default, setting = REST_OVERRIDES.get(name, (None, None))
    override = getattr(settings, setting, "") if setting else ""
    if override:
        if name == "coinbaseexchange":
            client.hostname = override.split("://", 1)[1].rstrip("/")
        client.urls["api"] = {key: (value.replace(default, override.rstrip("/")).replace(
            "https://api.{hostname}", override.rstrip("/")) if isinstance(value, str) else value)
            for key, value in client.urls["api"].items()}
    return client


def exchange_markets(exchange: Exchange) -> list[dict]:
    """The exchange's spot markets as ccxt unifies them (CatalogError when unreachable)."""
    import ccxt

    client = _client(exchange)
    try:
        markets = client.fetch_markets()
    except ccxt.BaseError as exc:
        raise CatalogError(f"{exchange.slug}: {type(exc).__name__}: {exc}") from exc
    return [m for m in markets if m.get("spot") and m.get("base") and m.get("quote")]


def _increment(value, mode) -> Decimal | None:
    """ccxt's precision as an increment: TICK_SIZE mode gives it, DECIMAL_PLACES the digits."""
    import ccxt

    if value is None:
        return None
    if mode == ccxt.DECIMAL_PLACES:
        return Decimal(1).scaleb(-int(value))
    return Decimal(str(value)).normalize()


def _min_amount(market: dict) -> Decimal | None:
    """ccxt's limits.amount.min; Coinbase's base_min_size where ccxt leaves it out."""
    value = ((market.get("limits") or {}).get("amount") or {}).get("min")
    if value is None:
        value = (market.get("info") or {}).get("base_min_size")
    return None if value is None else Decimal(str(value))


@transaction.atomic
def catalog_sync(*, exchange: Exchange, markets: list[dict], quotes: set[str] | None = None,
                 precision_mode=None) -> CatalogSync:
    import ccxt

    mode = ccxt.TICK_SIZE if precision_mode is None else precision_mode
    result = CatalogSync()
    listed = set()
    for market in markets:
        base, quote = market["base"].upper(), market["quote"].upper()
        if quotes and quote not in quotes:
            continue
        listed.add((base, quote))
        precision = market.get("precision") or {}
        fields = {
            "price_increment": _increment(precision.get("price"), mode),
            "amount_increment": _increment(precision.get("amount"), mode),
            "min_amount": _min_amount(market),
            "trading_status": Pair.TradingStatus.TRADING if market.get("active", True) else Pair.TradingStatus.HALTED,
        }
        pair, created = Pair.objects.get_or_create(exchange=exchange, base=asset_ensure(base),
                                                   quote=asset_ensure(quote), defaults=fields)
        name = f"{base}/{quote}"
        if created:
            result.created.append(name)
            continue
        changed = {k: v for k, v in fields.items() if getattr(pair, k) != v}
        if changed or not pair.streamable:
            Pair.objects.filter(pk=pair.pk).update(streamable=True, **changed)
            result.updated.append(name)
        else:
            result.unchanged += 1
    gone = Pair.objects.filter(exchange=exchange).exclude(trading_status=Pair.TradingStatus.DELISTED)
    if quotes:
        gone = gone.filter(quote__symbol__in=quotes)
    for pair in gone.select_related("base", "quote"):
        if (pair.base.symbol, pair.quote.symbol) not in listed:
            Pair.objects.filter(pk=pair.pk).update(trading_status=Pair.TradingStatus.DELISTED, streamable=False)
            result.delisted.append(f"{pair.base.symbol}/{pair.quote.symbol}")
    return result
