"""Snapshot bars: which fields each metric contributes, and the body written in pieces so
86,400 bars never sit in memory as one structure. Plain Python."""

from __future__ import annotations

from typing import Iterable, Iterator

import orjson

import toon
from market.bars import Bar
from market.precision import NOISE_ONLY, Rounding

FIELDS = {
    "trade": ("open", "high", "low", "close", "volume", "buy_volume", "sell_volume", "trade_count", "vwap"),
    "book": ("bid_depth", "ask_depth", "imbalance", "circulating_supply"),
    "quote": ("bid_price", "ask_price", "mid_price", "spread_bps"),
}


def columns(metrics: list[str]) -> tuple[str, ...]:
    return ("ts_ms",) + tuple(f for m in metrics for f in FIELDS[m])


def _has_data(bar: Bar, metric: str) -> bool:
    return {"trade": bar.trade_count, "book": bar.book_samples, "quote": bar.quote_count}[metric] > 0


def row(bar: Bar, metrics: list[str], circulating_supply: float | None, rounding: Rounding = NOISE_ONLY) -> dict:
    """A bar's row: ts_ms, then each requested metric's fields; nulls where the bar has no
    data for the metric; numbers as market/precision.py serves them."""
    out = {"ts_ms": bar.ts_ms}
    for metric in metrics:
        present = _has_data(bar, metric)
        for field in FIELDS[metric]:
            if not present:
                out[field] = None
            elif field == "circulating_supply":
                out[field] = circulating_supply
            else:
                out[field] = getattr(bar, field)
    return rounding.row(out)


_SOURCE_COLUMNS = {
    "trade": ("trade_count", "open", "high", "low", "close", "volume", "buy_volume", "sell_volume", "notional"),
    "book": ("book_samples", "bid_amount_sum", "ask_amount_sum"),
    "quote": ("quote_count", "bid_price", "ask_price"),
}


def stored_columns(metrics: list[str]) -> tuple[str, ...]:
    """The bar-store columns a snapshot of these metrics reads."""
    return ("ts_ms",) + tuple(c for m in metrics for c in _SOURCE_COLUMNS[m])


def row_maker(metrics: list[str], circulating_supply: float | None, rounding: Rounding = NOISE_ONLY):
    """A function from a tuple of stored_columns(metrics) to the snapshot row; the same
    values as row(), computed straight from the columns, each field rounded by its own
    rule (this is the hot loop of an 86,400-bar snapshot)."""
    r = rounding.rounder
    want = set(metrics)
    trade_r = [r(name) for name in ("open", "high", "low", "close", "volume", "buy_volume", "sell_volume", "vwap")]
    depth_r = [r(name) for name in ("bid_depth", "ask_depth", "imbalance")]
    supply = r("circulating_supply")(circulating_supply)
    quote_r = [r(name) for name in ("bid_price", "ask_price", "mid_price", "spread_bps")]
    no_trade, no_book, no_quote = (dict.fromkeys(FIELDS[m]) for m in ("trade", "book", "quote"))

    def make(values) -> dict:
        out = {"ts_ms": values[0]}
        i = 1
        if "trade" in want:
            count, open_, high, low, close, volume, buy, sell, notional = values[i:i + 9]
            i += 9
            if count:
                o, h, lo, c, v, b, s, w = trade_r
                out.update(open=o(open_), high=h(high), low=lo(low), close=c(close), volume=v(volume),
                           buy_volume=b(buy), sell_volume=s(sell), trade_count=count,
                           vwap=w(notional / volume if volume else None))
            else:
                out.update(no_trade)
        if "book" in want:
            samples, bid_sum, ask_sum = values[i:i + 3]
            i += 3
            if samples:
                total = bid_sum + ask_sum
                bd, ad, im = depth_r
                out.update(bid_depth=bd(bid_sum / samples), ask_depth=ad(ask_sum / samples),
                           imbalance=im((bid_sum - ask_sum) / total if total else None),
                           circulating_supply=supply)
            else:
                out.update(no_book)
        if "quote" in want:
            quotes, bid, ask = values[i:i + 3]
            if quotes and bid is not None and ask is not None:
                mid = (bid + ask) / 2
                br, ar, mr, sr = quote_r
                out.update(bid_price=br(bid), ask_price=ar(ask), mid_price=mr(mid),
                           spread_bps=sr((ask - bid) / mid * 10_000 if mid else None))
            else:
                out.update(no_quote)
        return out

    return make


class JsonPieces:
    """`{...head, "bars": [...]}` written as an opening, one piece per page, a closing."""

    def __init__(self, head: dict):
        self.opening = orjson.dumps(head)[:-1] + b',"bars":['
        self.closing = b"]}"
        self._first = True

    def page(self, rows: list[dict]) -> bytes:
        body = orjson.dumps(rows)[1:-1]
        if self._first:
            self._first = False
            return body
        return b"," + body


class ToonPieces:
    """The TOON document of `{...head, "bars": rows}` (count >= 1) written in pieces: the
    head's lines and the table header, then the table rows page by page."""

    def __init__(self, head: dict, count: int, fields: tuple[str, ...]):
        self.opening = (toon.encode(head) + f"\nbars[{count}]{{{','.join(fields)}}}:").encode("utf-8")
        self.closing = b""

    def page(self, rows: list[dict]) -> bytes:
        # the page's rows are the table rows of the encoder's own document of them
        table = toon.encode({"bars": rows})
        return ("\n" + table.split("\n", 1)[1]).encode("utf-8")


def write(pieces, pages: Iterable[list[dict]]) -> Iterator[bytes]:
    yield pieces.opening
    for rows in pages:
        if rows:
            yield pieces.page(rows)
    if pieces.closing:
        yield pieces.closing
