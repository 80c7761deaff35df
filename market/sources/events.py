"""Normalised market events, the one language every source speaks. Plain Python.

Times are exchange timestamps in epoch milliseconds (UTC). Quantities are in the base
asset, prices in the quote asset. A source yields events ordered by `ts_ms`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Protocol, Union

BUY, SELL = "buy", "sell"
BID, ASK = "bid", "ask"


@dataclass(frozen=True, slots=True)
class Trade:
    ts_ms: int
    price: float
    qty: float
    side: str  # the taker's side: "buy" lifts the ask, "sell" hits the bid
    trade_id: str | None = None


@dataclass(frozen=True, slots=True)
class BookSnapshot:
    """The whole visible book (best first on each side); replaces what came before."""

    ts_ms: int
    bids: tuple[tuple[float, float], ...]  # (price, qty), descending price
    asks: tuple[tuple[float, float], ...]  # (price, qty), ascending price


@dataclass(frozen=True, slots=True)
class BookDelta:
    """Level changes at one instant: each (price, qty) sets the level's new total quantity;
    qty 0 removes the level. Every level change counts as one book update."""

    ts_ms: int
    bids: tuple[tuple[float, float], ...] = ()
    asks: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True, slots=True)
class BookLost:
    """The book is unknown from this instant until the next BookSnapshot: the feed lost
    messages (a dropped connection, a sequence gap, a stale stream) and will resync.
    Consumers drop their book rather than keep serving a stale one."""

    ts_ms: int
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Quote:
    """Best bid and offer."""

    ts_ms: int
    bid_price: float
    bid_qty: float
    ask_price: float
    ask_qty: float


Event = Union[Trade, BookSnapshot, BookDelta, BookLost, Quote]


@dataclass(frozen=True, slots=True)
class PairRef:
    exchange: str
    base: str
    quote: str

    @property
    def symbol(self) -> str:
        return f"{self.base}-{self.quote}"


class Source(Protocol):
    """A feed of normalised events for a pair.

    `events(pair, start_ms, end_ms)` yields the events with start_ms <= ts_ms < end_ms in
    time order. It is a pure function of its arguments where the source can replay
    (simulator, replay files): reading [a, c) gives the same events as [a, b) then [b, c),
    which is what makes ingestion restartable from a stored cursor."""

    name: str

    def events(self, pair: PairRef, start_ms: int, end_ms: int) -> Iterator[Event]: ...

    def earliest_ms(self, pair: PairRef) -> int | None:
        """The earliest time the source can provide for the pair, None for no limit."""
        ...
