"""Snapshot bars: which fields each metric contributes, and the body written in pieces so
86,400 bars never sit in memory as one structure. Plain Python."""

from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np
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


def page_maker(metrics: list[str], circulating_supply: float | None, rounding: Rounding = NOISE_ONLY):
    """A function from a page of tuples of stored_columns(metrics) to its snapshot rows: the
    rows row() gives the page's bars, computed column by column with the rounding on arrays
    (Rounding.column): the hot loop of an 86,400-bar snapshot. A page holding what the
    columns do not expect (a null inside a metric with data, a number that is not a float)
    is made bar by bar by row()."""
    stored, fields = stored_columns(metrics), columns(metrics)
    supply = rounding.rounder("circulating_supply")(circulating_supply)

    def make(page: list[tuple]) -> list[dict]:
        if not page:
            return []
        try:
            made = _page_columns(list(zip(*page)), metrics, supply, rounding)
        except _Unexpected:
            return [row(Bar(**dict(zip(stored, values))), metrics, circulating_supply, rounding) for values in page]
        return [dict(zip(fields, values)) for values in zip(*made)]

    return make


class _Unexpected(Exception):
    """A page the column-wise rows do not cover."""


def _page_columns(source: list[tuple], metrics: list[str], supply, rounding: Rounding) -> list:
    """The snapshot's columns (in columns(metrics) order) of a page given as its stored columns."""
    out, at, size = [source[0]], 1, len(source[0])
    for metric in metrics:
        width = len(_SOURCE_COLUMNS[metric])
        counts, *values = source[at:at + width]
        at += width
        present = [i for i, count in enumerate(counts) if count]
        if len(present) < size:
            counts = [counts[i] for i in present]
            values = [[column[i] for i in present] for column in values]
        for column in values:
            if column and set(map(type, column)) != {float}:
                raise _Unexpected
        arrays = [np.array(column, dtype=np.float64) for column in values]
        with np.errstate(all="ignore"):  # a division by zero is where the field is null
            made = _METRIC_COLUMNS[metric](counts, *arrays, supply=supply, rounding=rounding)
        out.extend(made if len(present) == size else [_spread(column, present, size) for column in made])
    return out


def _spread(column: list, present: list[int], size: int) -> list:
    full = [None] * size
    for i, value in zip(present, column):
        full[i] = value
    return full


def _rounded(rounding: Rounding, name: str, values: np.ndarray, defined: np.ndarray | None = None) -> list:
    """The values rounded by the field's rule; None where `defined` is False."""
    if defined is None:
        return rounding.column(name, values.tolist())
    rounded = iter(rounding.column(name, values[defined].tolist()))
    return [next(rounded) if flag else None for flag in defined.tolist()]


# Each field computed as the Bar property row() reads (market/bars.py), on arrays of the
# rows that have data for the metric.
def _trade_columns(counts, open_, high, low, close, volume, buy, sell, notional, *, supply, rounding):
    return [_rounded(rounding, "open", open_), _rounded(rounding, "high", high), _rounded(rounding, "low", low),
            _rounded(rounding, "close", close), _rounded(rounding, "volume", volume),
            _rounded(rounding, "buy_volume", buy), _rounded(rounding, "sell_volume", sell), list(counts),
            _rounded(rounding, "vwap", notional / volume, volume != 0)]


def _book_columns(counts, bid_sum, ask_sum, *, supply, rounding):
    samples = np.array(counts, dtype=np.float64)
    total = bid_sum + ask_sum
    return [_rounded(rounding, "bid_depth", bid_sum / samples), _rounded(rounding, "ask_depth", ask_sum / samples),
            _rounded(rounding, "imbalance", (bid_sum - ask_sum) / total, total != 0), [supply] * len(counts)]


def _quote_columns(counts, bid, ask, *, supply, rounding):
    mid = (bid + ask) / 2
    return [_rounded(rounding, "bid_price", bid), _rounded(rounding, "ask_price", ask),
            _rounded(rounding, "mid_price", mid), _rounded(rounding, "spread_bps", (ask - bid) / mid * 10_000, mid != 0)]


_METRIC_COLUMNS = {"trade": _trade_columns, "book": _book_columns, "quote": _quote_columns}


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
