"""Functions that read the catalog and the bar store."""

from __future__ import annotations

from typing import Iterator

from django.db.models import QuerySet

from .bars import BAR_FIELDS, Bar
from .models import BAR_MODELS, Asset, Exchange, Pair


def pair_get(*, exchange: str, base: str, quote: str) -> Pair | None:
    """The pair behind a path, matched case-insensitively."""
    return (Pair.objects.select_related("exchange", "base", "quote")
            .filter(exchange__slug=exchange.lower(), base__symbol=base.upper(), quote__symbol=quote.upper(),
                    exchange__is_active=True)
            .first())


def pair_by_symbol(*, exchange: str, symbol: str) -> Pair | None:
    base, sep, quote = symbol.partition("-")
    if not sep or not base or not quote or "-" in quote:
        return None
    return pair_get(exchange=exchange, base=base, quote=quote)


def exchange_get(*, slug: str) -> Exchange | None:
    return Exchange.objects.filter(slug=slug.lower(), is_active=True).first()


def pair_streamable(*, exchange: str, base: str, quote: str) -> Pair | None:
    """The pair behind a path if it can be streamed (subscribed to, snapshotted, followed
    live), else None: the one place that decides "unknown or not streamable"."""
    pair = pair_get(exchange=exchange, base=base, quote=quote)
    return pair if pair is not None and pair.streamable else None


def pairs_streamable() -> QuerySet[Pair]:
    return (Pair.objects.select_related("exchange", "base", "quote")
            .filter(streamable=True, exchange__is_active=True))


def bars_range(*, pair: Pair, granularity: str, from_ms: int, to_ms: int) -> Iterator[Bar]:
    """Stored bars with from_ms <= ts_ms < to_ms in time order. Callers bound the range
    (series endpoints cap it), so one plain fetch beats a server-side cursor."""
    rows = (BAR_MODELS[granularity].objects.filter(pair=pair, ts_ms__gte=from_ms, ts_ms__lt=to_ms)
            .order_by("ts_ms").values_list(*BAR_FIELDS))
    for row in rows:
        yield Bar(*row)


def ranked_assets_on(*, exchange: Exchange, n: int) -> list[tuple[Asset, list[str]]]:
    """Top-n assets by market-cap rank that are the base of a pair on the exchange, each
    with its pair symbols there."""
    pairs = (Pair.objects.filter(exchange=exchange, base__market_cap_rank__isnull=False)
             .select_related("base", "quote").order_by("base__market_cap_rank", "quote__symbol"))
    ranked: dict[int, tuple[Asset, list[str]]] = {}
    for pair in pairs:
        entry = ranked.setdefault(pair.base_id, (pair.base, []))
        entry[1].append(pair.symbol)
    return list(ranked.values())[:n]
