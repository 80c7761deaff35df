"""The simulated order book of one minute: its levels (lots by tick, per side), the tracked
orders of the episodes among them, the operations every flow changes it with, and the
events it reports (the snapshot, a BookDelta of the levels changed since the last flush,
a Quote when the top of the book moved, a Trade per level a taker touched).

The book knows nothing of prices moving or of who trades: the flows (order_flow,
informed, ladders, the episodes) decide and the book only applies. Ticks and lots are
integers; `px` and `qty` turn them into the prices and quantities of the events."""

from __future__ import annotations

from typing import TYPE_CHECKING

from market.bars import MINUTE_MS
from market.sources.events import BookDelta, BookSnapshot, Quote, Trade
from market.sources.order_book import level_set

if TYPE_CHECKING:
    from .profiles import _Profile


class _Order:
    """A tracked order (episodes): its level, the quantity ahead of it in the queue, what
    remains, what was filled."""

    __slots__ = ("is_bid", "tick", "ahead", "rem", "orig", "filled")

    def __init__(self, is_bid: bool, tick: int, ahead: int, lots: int) -> None:
        self.is_bid, self.tick, self.ahead, self.rem, self.orig, self.filled = is_bid, tick, ahead, lots, lots, 0


class _Book:
    """The book of one pair in one minute (see the module docstring). `ts` is the
    exchange time the events it emits carry; the minute's clock sets it."""

    def __init__(self, prof: _Profile, m: int) -> None:
        self.m = m  # the minute: trade ids are "<minute>-<n>"
        self.bids: dict[int, int] = {}
        self.asks: dict[int, int] = {}
        self.depth_b = self.depth_a = 0  # total lots per side
        self.bid_ticks: list[int] = []  # bid ticks ascending (best last)
        self.ask_ticks: list[int] = []  # ask ticks ascending (best first)
        self.special: dict = {}  # (is_bid, tick) -> [_Order]
        self.changed_bids: dict[int, int] = {}
        self.changed_asks: dict[int, int] = {}
        self.out: list = []  # the events emitted, in order
        self.top = None  # (bid tick, bid lots, ask tick, ask lots) of the last Quote
        self.ts = m * MINUTE_MS
        self.seq = 0  # trades in the minute (trade ids)
        self._tick, self._pdec, self._lot, self._qdec = prof.tick, prof.pdec, prof.lot, prof.qdec

    # -- conversions -------------------------------------------------------------------
    def px(self, tk: int) -> float:
        return round(tk * self._tick, self._pdec)

    def qty(self, lots: int) -> float:
        return round(lots * self._lot, self._qdec)

    # -- what it holds -----------------------------------------------------------------
    def side(self, is_bid: bool) -> tuple[dict, list]:
        """(lots by tick, ticks ascending) of a side."""
        return (self.bids, self.bid_ticks) if is_bid else (self.asks, self.ask_ticks)

    def touch(self, is_bid: bool) -> int | None:
        """The side's best tick, None on an empty side."""
        if is_bid:
            return self.bid_ticks[-1] if self.bid_ticks else None
        return self.ask_ticks[0] if self.ask_ticks else None

    def top_depth(self, is_bid: bool, n: int = 10) -> int:
        if is_bid:
            return sum(self.bids[t] for t in self.bid_ticks[-n:])
        return sum(self.asks[t] for t in self.ask_ticks[:n])

    def imbalance(self) -> float:
        """(bid - ask) / (bid + ask) of the top-10 depth, 0 on an empty book."""
        b = self.top_depth(True)
        a = self.top_depth(False)
        return (b - a) / (b + a) if a + b else 0.0

    def protected(self, is_bid: bool, tk: int) -> int:
        """Lots of tracked orders resting at tk: background flow does not cancel them."""
        if not self.special:
            return 0
        orders = self.special.get((is_bid, tk))
        return sum(o.rem for o in orders) if orders else 0

    def crosses(self, is_bid: bool, tk: int) -> bool:
        """Whether a bid (an ask) at tk would reach the other side's best price."""
        if is_bid:
            return bool(self.ask_ticks) and tk >= self.ask_ticks[0]
        return bool(self.bid_ticks) and tk <= self.bid_ticks[-1]

    def uncrossed(self, is_bid: bool, tk: int) -> int:
        """tk, or the best tick short of the other side's touch where tk would cross it."""
        if is_bid:
            if self.ask_ticks and tk >= self.ask_ticks[0]:
                return self.ask_ticks[0] - 1
        elif self.bid_ticks and tk <= self.bid_ticks[-1]:
            return self.bid_ticks[-1] + 1
        return tk

    def queue_ahead(self, order: _Order) -> int:
        """Lots a market order must take before it reaches `order`: the better levels of its
        side and the queue ahead of it at its own price."""
        if order.is_bid:
            return sum(self.bids[t] for t in self.bid_ticks if t > order.tick) + order.ahead
        return sum(self.asks[t] for t in self.ask_ticks if t < order.tick) + order.ahead

    # -- levels ------------------------------------------------------------------------
    def set_level(self, is_bid: bool, tk: int, lots: int) -> None:
        if is_bid:
            self.depth_b += lots - level_set(self.bids, self.bid_ticks, tk, lots)
            self.changed_bids[tk] = lots
        else:
            self.depth_a += lots - level_set(self.asks, self.ask_ticks, tk, lots)
            self.changed_asks[tk] = lots

    def add_at(self, is_bid: bool, tk: int, lots: int) -> None:
        """A background limit order (never crossing the book: at the touch at most)."""
        tk = self.uncrossed(is_bid, tk)
        self.set_level(is_bid, tk, (self.bids if is_bid else self.asks).get(tk, 0) + lots)

    def cancel_background(self, is_bid: bool, tk: int, level: int, lots: int, prot: int) -> None:
        """Cancel `lots` background lots of the level at tk (holding `level` lots, `prot` of
        them tracked). Tracked orders keep their place in the queue, but no more can be
        ahead of them than the background left."""
        self.set_level(is_bid, tk, level - lots)
        if prot:
            for o in self.special.get((is_bid, tk), ()):
                o.ahead = min(o.ahead, level - lots - prot)

    def prune_outside(self, lo: float, hi: float) -> None:
        """Drop the background levels of bids below lo and asks above hi (orders left far
        behind expire), from the far end, up to the first level a tracked order holds."""
        bid_ticks, ask_ticks = self.bid_ticks, self.ask_ticks
        while bid_ticks and bid_ticks[0] < lo:
            tk = bid_ticks[0]
            prot = self.protected(True, tk)
            if prot >= self.bids[tk]:
                break
            self.set_level(True, tk, prot)
            if prot:
                break
        while ask_ticks and ask_ticks[-1] > hi:
            tk = ask_ticks[-1]
            prot = self.protected(False, tk)
            if prot >= self.asks[tk]:
                break
            self.set_level(False, tk, prot)
            if prot:
                break

    # -- tracked orders ----------------------------------------------------------------
    def place(self, is_bid: bool, tk: int, lots: int) -> _Order:
        """A tracked limit order (never crossing the book)."""
        lots = max(1, int(lots))
        tk = self.uncrossed(is_bid, tk)
        level = (self.bids if is_bid else self.asks).get(tk, 0)
        order = _Order(is_bid, tk, level, lots)
        self.special.setdefault((is_bid, tk), []).append(order)
        self.set_level(is_bid, tk, level + lots)
        return order

    def move(self, order: _Order, tk: int) -> _Order | None:
        """Re-place what remains of a tracked order at tk (a pegged order following the
        touch). It stays the same order: what it was placed with and what it filled carry
        over. None when nothing of it was left to move."""
        lots = self.pull(order)
        if lots <= 0:
            return None
        moved = self.place(order.is_bid, tk, lots)
        moved.orig, moved.filled = order.orig, order.filled
        return moved

    def pull(self, order: _Order, fraction: float = 1.0) -> int:
        """Cancel a fraction of what remains of a tracked order; returns lots cancelled."""
        x = order.rem if fraction >= 1.0 else int(round(order.rem * fraction))
        book = self.bids if order.is_bid else self.asks
        level = book.get(order.tick, 0)
        x = min(x, level)
        if x <= 0:
            return 0
        order.rem -= x
        self.set_level(order.is_bid, order.tick, level - x)
        if order.rem <= 0:
            self._forget(order)
        return x

    def _forget(self, order: _Order) -> None:
        key = (order.is_bid, order.tick)
        orders = self.special.get(key)
        if orders and order in orders:
            orders.remove(order)
            if not orders:
                del self.special[key]

    def _consume(self, is_bid: bool, tk: int, x: int) -> None:
        """x lots traded at tk: the queue ahead of the tracked orders there goes first."""
        orders = self.special.get((is_bid, tk))
        if not orders:
            return
        for o in list(orders):
            if x <= o.ahead:
                o.ahead -= x
            else:
                fill = min(o.rem, x - o.ahead)
                o.rem -= fill
                o.filled += fill
                o.ahead = 0
                if o.rem <= 0:
                    self._forget(o)

    # -- trades ------------------------------------------------------------------------
    def trade(self, tk: int, lots: int, taker_buy: bool) -> None:
        """Print a trade (the level it took from is the caller's to change)."""
        self.seq += 1
        self.out.append(Trade(self.ts, self.px(tk), self.qty(lots), "buy" if taker_buy else "sell",
                              f"{self.m}-{self.seq}"))

    def take(self, is_bid: bool, tk: int, level: int, lots: int, taker_buy: bool) -> None:
        """A taker takes `lots` of the level at tk (holding `level`): one print."""
        self._consume(is_bid, tk, lots)
        self.set_level(is_bid, tk, level - lots)
        self.trade(tk, lots, taker_buy)

    def market(self, taker_buy: bool, lots: int, keep_levels: int = 3) -> int:
        """A market order walking the opposite side (never its last keep_levels levels);
        returns lots executed."""
        is_bid = not taker_buy
        book, keys = (self.bids, self.bid_ticks) if is_bid else (self.asks, self.ask_ticks)
        left = int(lots)
        done = 0
        while left > 0 and len(keys) > keep_levels:
            tk = keys[-1] if is_bid else keys[0]
            level = book[tk]
            take = left if left < level else level
            self.take(is_bid, tk, level, take, taker_buy)
            left -= take
            done += take
        return done

    # -- events ------------------------------------------------------------------------
    def snapshot(self, ts: int) -> None:
        """Emit the whole book (a resync) and its quote; forget the changes that built it."""
        self.changed_bids.clear()
        self.changed_asks.clear()
        px, qty = self.px, self.qty
        self.out.append(BookSnapshot(
            ts,
            tuple((px(t), qty(self.bids[t])) for t in reversed(self.bid_ticks)),
            tuple((px(t), qty(self.asks[t])) for t in self.ask_ticks),
        ))
        self.quote()

    def flush(self) -> None:
        """Emit the levels changed since the last flush as one BookDelta (then the quote)."""
        changed_bids, changed_asks = self.changed_bids, self.changed_asks
        if not changed_bids and not changed_asks:
            return
        px, qty = self.px, self.qty
        bids = tuple((px(t), qty(q)) for t, q in sorted(changed_bids.items(), reverse=True)) if changed_bids else ()
        asks = tuple((px(t), qty(q)) for t, q in sorted(changed_asks.items())) if changed_asks else ()
        changed_bids.clear()
        changed_asks.clear()
        self.out.append(BookDelta(self.ts, bids, asks))
        self.quote()

    def quote(self) -> None:
        """Emit a Quote when the best levels changed since the last one."""
        bid_ticks, ask_ticks = self.bid_ticks, self.ask_ticks
        if bid_ticks and ask_ticks:
            bt, at = bid_ticks[-1], ask_ticks[0]
            top = (bt, self.bids[bt], at, self.asks[at])
            if top != self.top:
                self.top = top
                self.out.append(Quote(self.ts, self.px(bt), self.qty(top[1]), self.px(at), self.qty(top[3])))
