"""Replay recorded events from JSON-lines files (plain or gzip). Plain Python.

One normalised event per line (docs/REPLAY_FORMAT.md):

    {"type": "trade", "exchange": "binance", "base": "BTC", "quote": "USDT",
     "ts_ms": 1700000000123, "price": 43000.1, "qty": 0.5, "side": "buy", "trade_id": "42"}

Types: trade (price, qty, side, trade_id), book_snapshot / book_delta (bids, asks as
[[price, qty], ...]), book_lost (reason), quote (bid_price, bid_qty, ask_price, ask_qty). Pairs match with
the exchange lower-cased and base/quote upper-cased. Each file must be in time order
(ts_ms never decreasing); several files are merged by time (ties: file name order, then
line order). A bad line raises ValueError naming the file and the line number.

`ReplaySource(path_or_dir)` indexes the files once (first use): which pairs each holds,
their first/last timestamp and a byte offset every few thousand lines, so reading a
window seeks close to its start instead of parsing the whole file every time. A window
that starts where the pair's previous one ended continues on the open file (gzip cannot
seek cheaply), so ingestion's one-second windows cost what one long read costs.

`ReplaySource(path, loop_from_ms=A)` plays the recording over and over from A on (a demo
served from real traffic): see `LoopedReplay`."""

from __future__ import annotations

import gzip
import heapq
from bisect import bisect_left
from pathlib import Path
from typing import Iterable, Iterator

import dataclasses
import threading

from market.sources.events import BookDelta, BookLost, BookSnapshot, Event, PairRef, Quote, Trade

try:  # orjson is a project dependency; fall back to the standard library
    import orjson

    _loads = orjson.loads

    def _dumps(obj) -> bytes:
        return orjson.dumps(obj)

    _JSON_ERRORS: tuple = (orjson.JSONDecodeError, ValueError)
except ImportError:  # pragma: no cover
    import json

    _loads = json.loads

    def _dumps(obj) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()

    _JSON_ERRORS = (ValueError,)

SUFFIXES = (".jsonl", ".ndjson", ".jsonl.gz", ".ndjson.gz", ".json.gz", ".json")
_CHECKPOINT_EVERY = 4096  # lines between stored seek positions


def _pair_key(exchange, base, quote) -> tuple[str, str, str]:
    return (str(exchange).lower(), str(base).upper(), str(quote).upper())


def _open(path: Path, mode: str = "rb"):
    if path.name.endswith(".gz"):
        return gzip.open(path, mode)
    return open(path, mode)


def _levels(value, name: str) -> tuple[tuple[float, float], ...]:
    if not isinstance(value, list):
        raise ValueError(f"{name} must be a list of [price, qty]")
    out = []
    for level in value:
        if not isinstance(level, (list, tuple)) or len(level) != 2:
            raise ValueError(f"{name} entries must be [price, qty], got {level!r}")
        out.append((_num(level[0], f"{name} price"), _num(level[1], f"{name} qty")))
    return tuple(out)


def _num(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    return float(value)


def _ts(obj: dict) -> int:
    ts = obj.get("ts_ms")
    if isinstance(ts, bool) or not isinstance(ts, int):
        if isinstance(ts, float) and ts.is_integer():
            return int(ts)
        raise ValueError(f"ts_ms must be an integer, got {ts!r}")
    return ts


def event_from_dict(obj) -> Event:
    """The event a decoded line describes (ValueError if it is not a valid event)."""
    if not isinstance(obj, dict):
        raise ValueError("a line must be a JSON object")
    kind = obj.get("type")
    ts = _ts(obj)
    try:
        if kind == "trade":
            side = obj["side"]
            if side not in ("buy", "sell"):
                raise ValueError(f"side must be 'buy' or 'sell', got {side!r}")
            trade_id = obj.get("trade_id")
            return Trade(ts, _num(obj["price"], "price"), _num(obj["qty"], "qty"), side,
                         None if trade_id is None else str(trade_id))
        if kind == "book_delta":
            return BookDelta(ts, _levels(obj.get("bids", []), "bids"), _levels(obj.get("asks", []), "asks"))
        if kind == "book_snapshot":
            return BookSnapshot(ts, _levels(obj["bids"], "bids"), _levels(obj["asks"], "asks"))
        if kind == "book_lost":
            return BookLost(ts, str(obj.get("reason", "")))
        if kind == "quote":
            return Quote(ts, _num(obj["bid_price"], "bid_price"), _num(obj["bid_qty"], "bid_qty"),
                         _num(obj["ask_price"], "ask_price"), _num(obj["ask_qty"], "ask_qty"))
    except KeyError as exc:
        raise ValueError(f"{kind} needs field {exc.args[0]!r}") from None
    raise ValueError(f"unknown type {kind!r} (trade, book_snapshot, book_delta, book_lost or quote)")


def event_to_dict(event: Event, pair: PairRef) -> dict:
    head = {"exchange": pair.exchange, "base": pair.base, "quote": pair.quote, "ts_ms": event.ts_ms}
    kind = type(event)
    if kind is Trade:
        return {"type": "trade", **head, "price": event.price, "qty": event.qty, "side": event.side,
                "trade_id": event.trade_id}
    if kind is BookDelta or kind is BookSnapshot:
        return {"type": "book_delta" if kind is BookDelta else "book_snapshot", **head,
                "bids": [list(level) for level in event.bids], "asks": [list(level) for level in event.asks]}
    if kind is BookLost:
        return {"type": "book_lost", **head, "reason": event.reason}
    if kind is Quote:
        return {"type": "quote", **head, "bid_price": event.bid_price, "bid_qty": event.bid_qty,
                "ask_price": event.ask_price, "ask_qty": event.ask_qty}
    raise TypeError(f"not a market event: {event!r}")


def write_jsonl(events: Iterable[Event], pair: PairRef, path, *, append: bool = False) -> int:
    """Record events of one pair to a JSON-lines file (gzip when the name ends in .gz).
    Returns the number of lines written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with _open(path, "ab" if append else "wb") as fh:
        buf = []
        for event in events:
            buf.append(_dumps(event_to_dict(event, pair)))
            n += 1
            if len(buf) >= 4096:
                fh.write(b"\n".join(buf) + b"\n")
                buf.clear()
        if buf:
            fh.write(b"\n".join(buf) + b"\n")
    return n


class _FileIndex:
    __slots__ = ("path", "order", "pairs", "checkpoints")

    def __init__(self, path: Path, order: int) -> None:
        self.path = path
        self.order = order
        self.pairs: dict[tuple, list] = {}  # pair -> [first_ts, last_ts, count]
        self.checkpoints: list[tuple[int, int, int]] = []  # (ts, byte offset, line number)


class ReplaySource:
    """A Source over recorded JSON-lines files: one file, or every *.jsonl / *.ndjson
    (optionally .gz) file under a directory."""

    name = "replay"

    def __init__(self, path_or_dir) -> None:
        root = Path(path_or_dir)
        if root.is_dir():
            files = sorted(p for p in root.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES))
        elif root.is_file():
            files = [root]
        else:
            raise FileNotFoundError(f"no replay file or directory at {root}")
        self.root = root
        self.files = files
        self._index: list[_FileIndex] | None = None
        self._resume: dict[tuple, _Resume] = {}
        self._resume_lock = threading.Lock()

    # -- index ---------------------------------------------------------------------
    def _indexed(self) -> list[_FileIndex]:
        if self._index is None:
            self._index = [self._scan(path, i) for i, path in enumerate(self.files)]
        return self._index

    def _scan(self, path: Path, order: int) -> _FileIndex:
        idx = _FileIndex(path, order)
        last_ts = None
        offset = 0
        with _open(path) as fh:
            for lineno, raw in enumerate(fh, 1):
                start = offset
                offset += len(raw)
                if not raw.strip():
                    continue
                obj = self._parse(raw, path, lineno)
                ts = obj["ts_ms"]
                if last_ts is not None and ts < last_ts:
                    raise ValueError(f"{path}:{lineno}: ts_ms {ts} goes back in time (previous {last_ts}); "
                                     "a replay file must be in time order")
                if lineno % _CHECKPOINT_EVERY == 1 and (not idx.checkpoints or idx.checkpoints[-1][0] < ts):
                    idx.checkpoints.append((ts, start, lineno))
                last_ts = ts
                key = _pair_key(obj["exchange"], obj["base"], obj["quote"])
                info = idx.pairs.get(key)
                if info is None:
                    idx.pairs[key] = [ts, ts, 1]
                else:
                    info[1] = ts
                    info[2] += 1
        return idx

    @staticmethod
    def _parse(raw: bytes, path: Path, lineno: int):
        """Decode and check one line; returns the dict with its event under '_event'."""
        try:
            obj = _loads(raw)
        except _JSON_ERRORS as exc:
            raise ValueError(f"{path}:{lineno}: not valid JSON ({exc})") from None
        try:
            event = event_from_dict(obj)
            for field in ("exchange", "base", "quote"):
                if not isinstance(obj.get(field), str) or not obj[field]:
                    raise ValueError(f"{field} must be a non-empty string")
        except ValueError as exc:
            raise ValueError(f"{path}:{lineno}: {exc}") from None
        obj["_event"] = event
        return obj

    # -- Source protocol ---------------------------------------------------------------
    def pairs(self) -> list[PairRef]:
        keys = sorted({key for idx in self._indexed() for key in idx.pairs})
        return [PairRef(*key) for key in keys]

    def earliest_ms(self, pair: PairRef) -> int | None:
        """First timestamp recorded for the pair (None when the files do not hold it)."""
        key = _pair_key(pair.exchange, pair.base, pair.quote)
        firsts = [idx.pairs[key][0] for idx in self._indexed() if key in idx.pairs]
        return min(firsts) if firsts else None

    def latest_ms(self, pair: PairRef) -> int | None:
        key = _pair_key(pair.exchange, pair.base, pair.quote)
        lasts = [idx.pairs[key][1] for idx in self._indexed() if key in idx.pairs]
        return max(lasts) if lasts else None

    def events(self, pair: PairRef, start_ms: int, end_ms: int) -> Iterator[Event]:
        key = _pair_key(pair.exchange, pair.base, pair.quote)
        streams = []
        for idx in self._indexed():
            info = idx.pairs.get(key)
            if info is None or info[1] < start_ms or info[0] >= end_ms:
                continue
            streams.append(self._read(idx, key, start_ms, end_ms))
        if len(streams) == 1:
            for _ts_, _order, _line, event in streams[0]:
                yield event
            return
        for _ts_, _order, _line, event in heapq.merge(*streams):
            yield event

    def _read(self, idx: _FileIndex, key: tuple, start_ms: int, end_ms: int):
        with self._resume_lock:
            resume = self._resume.pop((idx.order, key), None)  # one reader at a time owns it
        if resume is not None and resume.end_ms != start_ms:
            resume.fh.close()
            resume = None
        if resume is None:
            # seek to the last checkpoint strictly before start_ms: every line before it is earlier
            pos = bisect_left(idx.checkpoints, (start_ms,)) - 1
            offset, lineno = (idx.checkpoints[pos][1], idx.checkpoints[pos][2] - 1) if pos >= 0 else (0, 0)
            fh = _open(idx.path)
            if offset:
                fh.seek(offset)
            resume = _Resume(fh, lineno, None, start_ms)
        order = idx.order
        fh, lineno = resume.fh, resume.lineno
        finished = False
        try:
            pending = resume.pending
            while True:
                if pending is not None:
                    obj, line_of_obj, pending = pending[0], pending[1], None
                else:
                    raw = fh.readline()
                    if not raw:
                        break
                    lineno += 1
                    if not raw.strip():
                        continue
                    obj, line_of_obj = self._parse(raw, idx.path, lineno), lineno
                ts = obj["ts_ms"]
                if ts >= end_ms:
                    pending = (obj, line_of_obj)
                    break
                if ts < start_ms or _pair_key(obj["exchange"], obj["base"], obj["quote"]) != key:
                    continue
                yield (ts, order, line_of_obj, obj["_event"])
            finished = True
        finally:
            if finished:
                with self._resume_lock:
                    self._resume[(order, key)] = _Resume(fh, lineno, pending, end_ms)
            else:
                fh.close()


class _Resume:
    """Where the last window of a pair in a file stopped: the open file, the line count and
    the first line at or after the window's end (read, not yet used)."""

    __slots__ = ("fh", "lineno", "pending", "end_ms")

    def __init__(self, fh, lineno: int, pending, end_ms: int):
        self.fh, self.lineno, self.pending, self.end_ms = fh, lineno, pending, end_ms


class LoopedReplay:
    """A recording played over and over from `loop_from_ms` on, as if it were live.

    Rules:
    * The recording spans [first, last] (all pairs of all files). It plays with a period
      P = (last - first) rounded up to a whole second, plus one second; play k starts at
      loop_from_ms + k * P and holds every recorded event shifted by the same whole
      number of seconds (bars keep their contents).
    * Every play after the first starts with a BookLost: the book the previous play left
      is not carried over; it comes back with the recording's first snapshot.
    * Pure: the same loop_from_ms gives the same events for any window, in any split.
    * Nothing exists before loop_from_ms, and the source never ends."""

    name = "replay"

    def __init__(self, recording: ReplaySource, loop_from_ms: int):
        self.recording = recording
        self.loop_from_ms = loop_from_ms - loop_from_ms % 1000
        firsts = [info[0] for idx in recording._indexed() for info in idx.pairs.values()]
        lasts = [info[1] for idx in recording._indexed() for info in idx.pairs.values()]
        if not firsts:
            raise ValueError(f"no events in {recording.root}")
        self.first = min(firsts) - min(firsts) % 1000
        self.period = -(-(max(lasts) - self.first) // 1000) * 1000 + 1000
        self.shift = self.loop_from_ms - self.first

    def pairs(self) -> list[PairRef]:
        return self.recording.pairs()

    def earliest_ms(self, pair: PairRef) -> int | None:
        return self.loop_from_ms if self.recording.earliest_ms(pair) is not None else None

    def latest_ms(self, pair: PairRef) -> int | None:
        return None

    def events(self, pair: PairRef, start_ms: int, end_ms: int) -> Iterator[Event]:
        start_ms = max(start_ms, self.loop_from_ms)
        if end_ms <= start_ms or self.recording.earliest_ms(pair) is None:
            return
        play = (start_ms - self.loop_from_ms) // self.period
        while True:
            play_start = self.loop_from_ms + play * self.period
            if play_start >= end_ms:
                return
            offset = self.shift + play * self.period
            if play and start_ms <= play_start:
                yield BookLost(play_start, "the recording starts again")
            for event in self.recording.events(pair, max(start_ms, play_start) - offset,
                                               min(end_ms, play_start + self.period) - offset):
                yield dataclasses.replace(event, ts_ms=event.ts_ms + offset)
            play += 1


def record(source, pair: PairRef, start_ms: int, end_ms: int, path) -> int:
    """Write a source's events for a window to a replay file (e.g. simulator output)."""
    return write_jsonl(source.events(pair, start_ms, end_ms), pair, path)


__all__ = ["ReplaySource", "LoopedReplay", "write_jsonl", "record", "event_from_dict", "event_to_dict", "SUFFIXES"]
