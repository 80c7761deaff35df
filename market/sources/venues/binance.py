"""Binance spot raw streams: the exact order book, trades and best bid/ask. Plain Python.

`BinanceCodec` turns the documented messages into our events; it does no I/O.

Rules (what the rest of the service can rely on):

* Book sync is Binance's documented procedure: diffs (`<sym>@depth@100ms`) are buffered
  until the REST depth snapshot is there; diffs with `u <= lastUpdateId` are dropped; the
  first applied diff has `U <= lastUpdateId + 1 <= u` (a snapshot older than the oldest
  buffered diff is refused: `wants_snapshot` says why, fetch another); afterwards each
  diff's `U` is the previous `u + 1`, else the book is lost (`wants_snapshot` names the
  gap) and must be resynced from a new snapshot while diffs are buffered again. A diff
  whose `u` is not past the last applied one is a repeat and ignored.
* Every level the snapshot and the diffs give is kept: nothing is truncated. Levels
  beyond the snapshot's depth are unknown until a diff touches them.
* Times come from the frames, so an independent reader of the same frames reproduces
  them: a trade at `T`; a diff at its `E`; the snapshot at the `E` of the first diff
  applied after it (BookSnapshot, then that diff as a BookDelta, same time); a bookTicker
  (no exchange time; `u` in the depth update-id space) as a Quote at the `E` of the first
  diff whose `u >= ticker.u`, emitted just before that diff. A bookTicker arriving while
  the snapshot is awaited is buffered with the diffs and judged when they are replayed (the
  snapshot may have been served before it arrived); one arriving while a snapshot waits for
  its first diff, or after its diff was applied, is dropped; so are tickers still waiting
  when the book is lost.
* Trades: `m` true means the buyer was the maker, so the taker sold. A trade id that skips
  ahead counts the skipped trades in `trades_missed`; a repeated id is dropped.
"""

from __future__ import annotations

from typing import Iterable

from ..events import BookDelta, BookSnapshot, Event, Quote, Trade

MAX_BUFFERED_DIFFS = 10_000  # frames (diffs and tickers) held while the snapshot is awaited


def reach_pct(bids, asks) -> float | None:
    """How far from the mid a snapshot reaches on its shorter side, in % of the mid: the
    depth within that distance is known exactly; beyond it only levels a diff touched."""
    if not bids or not asks:
        return None
    best_bid, best_ask = float(bids[0][0]), float(asks[0][0])
    mid = (best_bid + best_ask) / 2
    return round(min(mid - float(bids[-1][0]), float(asks[-1][0]) - mid) / mid * 100, 3)


def _levels(raw) -> tuple[tuple[float, float], ...]:
    return tuple([(float(p), float(q)) for p, q in raw])  # a list first: faster than a generator


class BinanceCodec:
    def __init__(self, symbol: str):
        self.symbol = symbol.upper()
        self.synced = False
        self.last_u: int | None = None
        self._snapshot: dict | None = None
        self._buffer: list[dict] = []
        self._quotes: list[tuple[int, Quote]] = []  # (ticker u, quote without its time)
        self.last_trade_id: int | None = None
        self.trades_missed = 0
        self.synced_at_ms: int | None = None
        self.snapshot_reach_pct: float | None = None
        self.wants_snapshot = "first sync"  # why a (new) REST snapshot is needed; "" once synced

    @property
    def has_snapshot(self) -> bool:
        """A snapshot is waiting for the diff that makes it current."""
        return self._snapshot is not None

    def lose_book(self, why: str = "reconnect") -> None:
        """Forget the book (reconnect or gap); trade continuity is kept."""
        self.wants_snapshot = why
        self.synced = False
        self.last_u = None
        self._snapshot = None
        self._buffer = []
        self._quotes = []

    # -- frames -----------------------------------------------------------------------
    def on_snapshot(self, snapshot: dict) -> list[Event]:
        """The REST depth answer ({lastUpdateId, bids, asks})."""
        self._snapshot = snapshot
        self.synced = False
        self.wants_snapshot = ""
        out: list[Event] = []
        pending, self._buffer = self._buffer, []
        for frame in pending:
            if "U" in frame:
                out.extend(self._diff(frame))
            else:
                self._ticker(frame)
        return out

    def on_message(self, message: dict) -> list[Event]:
        """One combined-stream message {"stream": ..., "data": ...} (or its bare data)."""
        data = message.get("data", message)
        kind = data.get("e")
        if kind == "depthUpdate":
            return self._diff(data)
        if kind == "trade":
            return self._trade(data)
        if "u" in data and "b" in data and "a" in data and "e" not in data:
            self._ticker(data)
            return []
        return []

    # -- internals ----------------------------------------------------------------------
    def _diff(self, diff: dict) -> list[Event]:
        first, last = diff["U"], diff["u"]
        if not self.synced:
            snapshot = self._snapshot
            if snapshot is None:
                self._hold(diff)
                return []
            base = snapshot["lastUpdateId"]
            if last <= base:
                return []
            if first > base + 1:
                self._snapshot = None
                self._hold(diff)
                self.wants_snapshot = f"snapshot too old: lastUpdateId={base}, oldest diff U={first}"
                return []
            ts = diff["E"]
            self.synced, self.last_u, self._snapshot, self.synced_at_ms = True, last, None, ts
            self.snapshot_reach_pct = reach_pct(snapshot["bids"], snapshot["asks"])
            return [BookSnapshot(ts, _levels(snapshot["bids"]), _levels(snapshot["asks"])),
                    BookDelta(ts, _levels(diff["b"]), _levels(diff["a"]))]
        if last <= self.last_u:
            return []
        if first != self.last_u + 1:
            expected = self.last_u + 1
            self.lose_book()
            self._hold(diff)
            self.wants_snapshot = f"sequence gap: expected U={expected}, got U={first}"
            return []
        self.last_u = last
        ts = diff["E"]
        out: list[Event] = []
        if self._quotes:
            keep = []
            for u, quote in self._quotes:
                if u <= last:
                    out.append(Quote(ts, quote.bid_price, quote.bid_qty, quote.ask_price, quote.ask_qty))
                else:
                    keep.append((u, quote))
            self._quotes = keep
        out.append(BookDelta(ts, _levels(diff["b"]), _levels(diff["a"])))
        return out

    def _hold(self, frame: dict) -> None:
        """Buffer a diff or ticker until the snapshot is there (the oldest go past the cap)."""
        self._buffer.append(frame)
        if len(self._buffer) > MAX_BUFFERED_DIFFS:
            del self._buffer[0]

    def _ticker(self, data: dict) -> None:
        u = data["u"]
        if not self.synced:
            if self._snapshot is None:
                self._hold(data)
            return
        if u <= self.last_u:
            return
        self._quotes.append((u, Quote(0, float(data["b"]), float(data["B"]), float(data["a"]), float(data["A"]))))

    def _trade(self, data: dict) -> list[Event]:
        trade_id = data["t"]
        if self.last_trade_id is not None:
            if trade_id <= self.last_trade_id:
                return []
            self.trades_missed += trade_id - self.last_trade_id - 1
        self.last_trade_id = trade_id
        return [Trade(data["T"], float(data["p"]), float(data["q"]), "sell" if data["m"] else "buy", str(trade_id))]


def recording_lines(path_or_lines) -> Iterable[str]:
    if isinstance(path_or_lines, (str, bytes)) or hasattr(path_or_lines, "__fspath__"):
        import gzip
        from pathlib import Path

        path = Path(path_or_lines)
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as fh:
            yield from fh
    else:
        yield from path_or_lines


def binance_recording_events(path_or_lines, symbol: str) -> Iterable[Event]:
    """Our events from a recording of raw frames (`<recv ns> <json>` lines: the REST
    snapshot or combined-stream messages), through the live codec, in emission order.
    Messages of other symbols are skipped."""
    import orjson

    codec = BinanceCodec(symbol)
    stream_prefix = codec.symbol.lower() + "@"
    for line in recording_lines(path_or_lines):
        _, _, text = line.partition(" ")
        if not text.strip():
            continue
        message = orjson.loads(text)
        if "lastUpdateId" in message:
            yield from codec.on_snapshot(message)
        elif message.get("stream", stream_prefix).startswith(stream_prefix):
            yield from codec.on_message(message)
