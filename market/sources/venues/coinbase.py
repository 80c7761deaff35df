"""Coinbase Exchange websocket (level2, matches, ticker) as our events. Plain Python.

Rules (what the rest of the service can rely on):

* Book: `snapshot` is the whole book of the product; each `l2update` sets the listed
  levels (`[side, price, size]`, side "buy" is a bid, size 0 removes). level2 carries no
  sequence number: messages on one connection arrive complete and in order, so the book
  can only be lost with the connection, and every (re)subscription brings a new snapshot.
* Times come from the frames: an `l2update`, `match`/`last_match` and `ticker` at their
  `time`; the snapshot, which has none, at the time of the product's next `l2update` (it
  is held until then and sent just before it). Not the next ticker's or last_match's: they
  carry the time of the last trade, which can be seconds older than the book.
* Trades: a match's `side` is the maker's, so the taker is the other side. Trade ids are
  contiguous per product: ids skipped count in `trades_missed`, repeats are dropped.
* A ticker with a best bid and ask is a Quote (sizes when the ticker carries them, else 0).
"""

from __future__ import annotations

from datetime import datetime
from typing import Iterable

from ..events import BookDelta, BookSnapshot, Event, Quote, Trade


def iso_ms(text: str) -> int:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return int(moment.timestamp() * 1000)


def _side_levels(raw, descending: bool) -> tuple[tuple[float, float], ...]:
    levels = [(float(p), float(q)) for p, q, *_ in raw if float(q) > 0]
    levels.sort(reverse=descending)
    return tuple(levels)


class CoinbaseCodec:
    def __init__(self, product: str):
        self.product = product.upper()
        self.synced = False
        self._held: BookSnapshot | None = None
        self.last_trade_id: int | None = None
        self.trades_missed = 0
        self.synced_at_ms: int | None = None
        self.snapshot_reach_pct: float | None = None
        self.wants_snapshot = "first sync"

    def lose_book(self, why: str = "reconnect") -> None:
        self.synced = False
        self._held = None
        self.wants_snapshot = why

    def on_message(self, message: dict) -> list[Event]:
        if message.get("product_id") != self.product:
            return []
        kind = message.get("type")
        if kind == "snapshot":
            self._held = BookSnapshot(0, _side_levels(message.get("bids", ()), True),
                                      _side_levels(message.get("asks", ()), False))
            self.synced = False
            return []
        text = message.get("time")
        if not text:
            return []
        ts = iso_ms(text)
        out: list[Event] = []
        if self._held is not None and kind == "l2update":
            from .binance import reach_pct

            out.append(BookSnapshot(ts, self._held.bids, self._held.asks))
            self.snapshot_reach_pct = reach_pct(self._held.bids, self._held.asks)
            self._held, self.synced, self.synced_at_ms, self.wants_snapshot = None, True, ts, ""
        if kind == "l2update":
            if self.synced:
                bids, asks = [], []
                for side, price, size in message.get("changes", ()):
                    (bids if side == "buy" else asks).append((float(price), float(size)))
                out.append(BookDelta(ts, tuple(bids), tuple(asks)))
        elif kind in ("match", "last_match"):
            trade = self._match(message, ts)
            if trade is not None:
                out.append(trade)
        elif kind == "ticker":
            bid, ask = message.get("best_bid"), message.get("best_ask")
            if bid and ask:
                out.append(Quote(ts, float(bid), float(message.get("best_bid_size") or 0.0),
                                 float(ask), float(message.get("best_ask_size") or 0.0)))
        return out

    def _match(self, message: dict, ts: int) -> Trade | None:
        trade_id = int(message["trade_id"])
        if self.last_trade_id is not None:
            if trade_id <= self.last_trade_id:
                return None
            self.trades_missed += trade_id - self.last_trade_id - 1
        self.last_trade_id = trade_id
        taker = "buy" if message["side"] == "sell" else "sell"
        return Trade(ts, float(message["price"]), float(message["size"]), taker, str(trade_id))


def coinbase_recording_events(path_or_lines, product: str) -> Iterable[Event]:
    """Our events from a Coinbase websocket capture (`<time>: <json>` received lines, as
    in data/realdata/coinbase), through the live codec, in emission order."""
    import orjson

    from .binance import recording_lines

    codec = CoinbaseCodec(product)
    for line in recording_lines(path_or_lines):
        if " <- " in line.split("{", 1)[0] or "{" not in line:
            continue  # what the client sent, or a connection line
        message = orjson.loads(line[line.index("{"):])
        if isinstance(message, dict):
            yield from codec.on_message(message)
