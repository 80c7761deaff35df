"""A minute of one pair's second bars as one value: the packed tier of the second-bar store
(docs/DECISIONS.md, "Second bars packed by the minute"). Plain Python.

A pack is the minute's start, a bit mask of the seconds present (bit i: the bar at
minute + i s) and `data`: a format byte, then zstd of the null masks of the nullable
fields (bit j: the j-th present bar's value is NULL) and each field's non-NULL values side
by side, field after field in Bar's order, as raw little-endian float64 / int64. Values
round-trip bit for bit (-0.0, NaN payloads, infinities); NULL is the mask, never NaN.

zstd (level 3) of the plain values: on the 694 second bars of the recorded BTCUSDT /
ETHUSDT traffic it took 99 B a bar, against 108 B with each value XORed with its
predecessor, 112 B byte-shuffled, 120 B with lz4 (docs/DECISIONS.md); higher levels gain
2-5 % for several times the packing cost, which the ingestion tick pays."""

from __future__ import annotations

import sys
import threading
from array import array
from dataclasses import fields
from typing import Iterable, Sequence

import zstandard

from .bars import BAR_FIELDS, SECOND_MS, Bar

MINUTE_MS = 60 * SECOND_MS
FORMAT = 1
VALUE_FIELDS = BAR_FIELDS[1:]
# derived from Bar's annotations: "int" fields are stored as int64, the others as float64;
# "... | None" ones have a null mask
_TYPES = {f.name: str(f.type) for f in fields(Bar)}
INTEGER_FIELDS = frozenset(name for name in VALUE_FIELDS if _TYPES[name].split("|")[0].strip() == "int")
NULLABLE_FIELDS = tuple(name for name in VALUE_FIELDS if "None" in _TYPES[name])
_CODES = tuple("q" if name in INTEGER_FIELDS else "d" for name in VALUE_FIELDS)
_NULLABLE_AT = tuple(VALUE_FIELDS.index(name) for name in NULLABLE_FIELDS)
_MASK_BYTES = 8 * len(NULLABLE_FIELDS)
_LITTLE = sys.byteorder == "little"
_LEVEL = 3

_local = threading.local()  # zstd's (de)compressors are not thread-safe: one pair per thread


def _zstd():
    pair = getattr(_local, "zstd", None)
    if pair is None:
        pair = _local.zstd = (zstandard.ZstdCompressor(level=_LEVEL), zstandard.ZstdDecompressor())
    return pair


def minute_of(ts_ms: int) -> int:
    return ts_ms - ts_ms % MINUTE_MS


def encode(minute_ts_ms: int, rows: Sequence[Sequence]) -> tuple[int, bytes]:
    """(seconds mask, data) of one minute's bars, given as tuples in BAR_FIELDS order
    (ts_ms first), in time order, one per second, all within the minute."""
    if not rows:
        raise ValueError("a pack holds at least one bar")
    seconds, previous = 0, -1
    for row in rows:
        offset, rest = divmod(row[0] - minute_ts_ms, SECOND_MS)
        if rest or not 0 <= offset < 60 or offset <= previous:
            raise ValueError(f"bar at {row[0]} is not a whole second after the last in minute {minute_ts_ms}")
        seconds |= 1 << offset
        previous = offset
    return seconds, encode_columns(list(zip(*rows))[1:])


def encode_columns(columns: Sequence[Sequence]) -> bytes:
    """The data of a pack from its value columns (VALUE_FIELDS order; None for NULL), each
    as long as the seconds present."""
    masks, parts = [0] * len(NULLABLE_FIELDS), []
    for index, (code, column) in enumerate(zip(_CODES, columns)):
        if index in _NULLABLE_AT and None in column:
            mask = 0
            for position, value in enumerate(column):
                if value is None:
                    mask |= 1 << position
            masks[_NULLABLE_AT.index(index)] = mask
            column = [value for value in column if value is not None]
        values = array(code, column)
        parts.append(values.tobytes() if _LITTLE else _swapped(values))
    return encode_raw(masks, parts)


def encode_raw(null_masks: Sequence[int], values: Sequence[bytes]) -> bytes:
    """The data of a pack from the null mask of each of NULLABLE_FIELDS and each value
    field's non-NULL values as little-endian float64 / int64 bytes (a columnar writer's
    path, market/synthesis.py)."""
    masks = array("Q", null_masks)
    raw = bytearray(masks.tobytes() if _LITTLE else _swapped(masks))
    for part in values:
        raw += part
    return bytes([FORMAT]) + _zstd()[0].compress(bytes(raw))


def _swapped(values: array) -> bytes:
    values = array(values.typecode, values)
    values.byteswap()
    return values.tobytes()


def decode(minute_ts_ms: int, seconds: int, data: bytes, columns: tuple[str, ...] = BAR_FIELDS) -> list[tuple]:
    """The bars of a pack as tuples of `columns` (names of BAR_FIELDS), in time order."""
    if not data or data[0] != FORMAT:
        raise ValueError(f"unknown bar pack format {data[:1]!r}")
    raw = memoryview(_zstd()[1].decompress(data[1:]))
    stamps = [minute_ts_ms + offset * SECOND_MS for offset in range(60) if seconds >> offset & 1]
    count = len(stamps)
    masks = array("Q")
    masks.frombytes(raw[:_MASK_BYTES])
    if not _LITTLE:
        masks.byteswap()
    wanted = set(columns)
    values: dict[str, list] = {"ts_ms": stamps}
    at = _MASK_BYTES
    for index, (name, code) in enumerate(zip(VALUE_FIELDS, _CODES)):
        mask = masks[_NULLABLE_AT.index(index)] if index in _NULLABLE_AT else 0
        present = count - mask.bit_count()
        end = at + 8 * present
        if name in wanted:
            column = array(code)
            column.frombytes(raw[at:end])
            if not _LITTLE:
                column.byteswap()
            column = column.tolist()
            if mask:
                stored = iter(column)
                column = [None if mask >> position & 1 else next(stored) for position in range(count)]
            values[name] = column
        at = end
    if at != len(raw):
        raise ValueError("bar pack data does not match its seconds")
    return list(zip(*(values[name] for name in columns)))


def decode_bars(minute_ts_ms: int, seconds: int, data: bytes) -> list[Bar]:
    return [Bar(*row) for row in decode(minute_ts_ms, seconds, data)]


def count_between(minute_ts_ms: int, seconds: int, from_ms: int, to_ms: int) -> int:
    """How many of a pack's seconds fall in [from_ms, to_ms)."""
    low = max(0, -(-(from_ms - minute_ts_ms) // SECOND_MS))
    high = min(60, -(-(to_ms - minute_ts_ms) // SECOND_MS))
    if high <= low:
        return 0
    return (seconds >> low & ((1 << (high - low)) - 1)).bit_count()


def last_ts(minute_ts_ms: int, seconds: int) -> int:
    """The start of a pack's last second."""
    return minute_ts_ms + (seconds.bit_length() - 1) * SECOND_MS


def merged(rows: Iterable[Sequence], columns: tuple[str, ...], from_ms: int, to_ms: int,
           limit: int | None = None) -> list[tuple]:
    """The bars in [from_ms, to_ms) of a read of both tiers, in time order, as tuples of
    `columns`, at most `limit`. `rows`: tuples of the columns followed by a pack's seconds
    and data, both None for a bar stored as a row (a pack's row holds its minute start as
    ts_ms, the other columns unread). A second found in both (only while a write moves
    it) is taken from its row."""
    at = columns.index("ts_ms")
    stored, packed = [], []
    for row in rows:
        data = row[-1]
        if data is None:
            stored.append(row[:-2])
            continue
        minute = row[at]
        bars = decode(minute, row[-2], data, columns)
        if minute < from_ms or minute + MINUTE_MS > to_ms:
            bars = [bar for bar in bars if from_ms <= bar[at] < to_ms]
        packed += bars
    if not packed:
        out = stored
    elif not stored:
        out = packed
    elif stored[0][at] > packed[-1][at]:
        out = packed + stored
    else:
        by_ts = {bar[at]: bar for bar in packed}
        by_ts.update((bar[at], bar) for bar in stored)
        out = [by_ts[ts] for ts in sorted(by_ts)]
    return out if limit is None else out[:limit]
