"""A per-event depth feed netted the way exchanges publish depth: in fixed batches.

Binance's `@depth@100ms` (and Coinbase's `level2_batch`, 50 ms) send, once a batch, each
level that changed with its quantity at the batch's end. So an order added and cancelled
inside one batch never shows, a fill and a re-add at one price show as one change (or
none), and every level a market maker re-quoted in the batch arrives in one message.
`net_depth` turns a per-event stream (the simulator's) into that shape, so the detectors
are judged on both. Plain Python.

Rules:
* Batches are [k x batch_ms, (k + 1) x batch_ms). A batch's depth message carries the
  last quantity of every level changed in it, and only the levels whose quantity differs
  from the batch's start (a level that came back to where it was does not show), stamped
  with the last millisecond of the batch, as the exchange stamps it when it sends.
* Trades, quotes and book losses pass through at their own times; so they precede the
  depth message of their batch, as on a real feed where the trade stream is not netted.
* A `BookSnapshot` ends the open batch (its message is sent first) and passes through.
* The output is ordered by time; events of one millisecond keep their input order.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from .events import BookDelta, BookSnapshot, Event
from .order_book import levels_apply


class _Side:
    __slots__ = ("start", "last")

    def __init__(self) -> None:
        self.start: dict[float, float] = {}  # quantity at the batch's start of each changed level
        self.last: dict[float, float] = {}  # quantity now

    def apply(self, book: dict[float, float], levels) -> None:
        for price, qty in levels:
            if price not in self.start:
                self.start[price] = book.get(price, 0.0)
            self.last[price] = qty
        levels_apply(book, levels)

    def changed(self, descending: bool) -> tuple[tuple[float, float], ...]:
        out = [(p, q) for p, q in self.last.items() if q != self.start[p]]
        out.sort(reverse=descending)
        self.start.clear()
        self.last.clear()
        return tuple(out)


def net_depth(events: Iterable[Event], batch_ms: int) -> Iterator[Event]:
    """The events with their `BookDelta`s netted into batch_ms batches (0: unchanged)."""
    if batch_ms <= 0:
        yield from events
        return
    books = ({}, {})  # bids, asks: price -> qty, to know a level's quantity at the batch's start
    sides = (_Side(), _Side())
    batch = None  # index of the open batch

    def flush():
        bids, asks = sides[0].changed(True), sides[1].changed(False)
        if bids or asks:
            return BookDelta((batch + 1) * batch_ms - 1, bids, asks)
        return None

    for ev in events:
        k = ev.ts_ms // batch_ms
        if batch is not None and k != batch:
            out = flush()
            if out is not None:
                yield out
            batch = None
        kind = type(ev)
        if kind is BookDelta:
            batch = k
            sides[0].apply(books[0], ev.bids)
            sides[1].apply(books[1], ev.asks)
            continue
        if kind is BookSnapshot:
            if batch is not None:
                out = flush()
                if out is not None:
                    yield out
                batch = None
            books = ({p: q for p, q in ev.bids}, {p: q for p, q in ev.asks})
            yield ev
            continue
        yield ev
    if batch is not None:
        out = flush()
        if out is not None:
            yield out
