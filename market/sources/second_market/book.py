"""The generator's own order book: integer ticks and lots, the full book kept, the feed shown
as a truncated top-N window. Plain Python.

Episode orders ("own" orders) sit inside the aggregate levels with a queue position, so
takers fill the background ahead of them first and an episode knows what it still has
resting when it pulls."""

from __future__ import annotations

from bisect import bisect_left, insort

from ..events import BUY, SELL, BookDelta, BookSnapshot, Trade

INF = float("inf")


class Order:
    """A child order of an episode."""

    __slots__ = ("side", "tick", "lots", "ahead", "placed", "placed_ms", "pulled_ms", "filled", "cancelled", "tag",
                 "filled_by_pull_end")

    def __init__(self, side, tick, lots, ahead, placed_ms, tag=""):
        self.side, self.tick, self.lots, self.ahead = side, tick, lots, ahead
        self.placed, self.placed_ms, self.pulled_ms = lots, placed_ms, None
        self.filled = self.cancelled = 0
        self.filled_by_pull_end = None  # what takers had executed when the episode's last pull action ran
        self.tag = tag


class Side:
    __slots__ = ("sign", "qty", "keys", "own", "vis", "changed", "membership", "n_vis")

    def __init__(self, sign: int, n_vis: int):
        self.sign = sign  # +1 bids (best is highest), -1 asks
        self.qty: dict[int, int] = {}
        self.keys: list[int] = []  # -sign * tick, ascending = best first
        self.own: dict[int, list[Order]] = {}
        self.vis: dict[int, int] = {}  # what the feed has shown
        self.changed: set[int] = set()
        self.membership = False
        self.n_vis = n_vis

    def best(self):
        return -self.sign * self.keys[0] if self.keys else None

    def tick_at_rank(self, rank: int):
        """The tick of the rank-th occupied level (1 = the touch), None if the book is shorter."""
        return -self.sign * self.keys[rank - 1] if len(self.keys) >= rank else None

    def rank_of(self, tick: int) -> int:
        return bisect_left(self.keys, -self.sign * tick) + 1

    def own_lots(self, tick: int) -> int:
        return sum(o.lots for o in self.own.get(tick, ()))

    def background(self, tick: int) -> int:
        return self.qty.get(tick, 0) - self.own_lots(tick)

    def add(self, tick: int, lots: int) -> None:
        if lots <= 0:
            return
        q = self.qty.get(tick)
        if q is None:
            insort(self.keys, -self.sign * tick)
            self.membership = True
            q = 0
        self.qty[tick] = q + lots
        self.changed.add(tick)

    def remove(self, tick: int, lots: int) -> None:
        q = self.qty.get(tick, 0) - lots
        if q <= 0:
            if tick in self.qty:
                del self.qty[tick]
                key = -self.sign * tick
                i = bisect_left(self.keys, key)
                if i < len(self.keys) and self.keys[i] == key:
                    del self.keys[i]
                self.membership = True
        else:
            self.qty[tick] = q
        self.changed.add(tick)

    def cancel_background(self, tick: int, lots: int) -> int:
        lots = min(lots, self.background(tick))
        if lots <= 0:
            return 0
        self.remove(tick, lots)
        orders = self.own.get(tick)
        if orders:
            # cancels leave from anywhere in the queue; an own order keeps at most what stays
            rest = self.qty.get(tick, 0) - self.own_lots(tick)
            for o in orders:
                o.ahead = min(o.ahead, rest)
        return lots

    def fill(self, tick: int, lots: int) -> None:
        """Takers consume `lots` at a level, front of the queue first."""
        orders = self.own.get(tick)
        if orders:
            for o in orders:
                if lots <= o.ahead:
                    o.ahead -= lots
                else:
                    take = min(o.lots, lots - o.ahead)
                    o.lots -= take
                    o.filled += take
                    o.ahead = 0
            remaining = [o for o in orders if o.lots > 0]
            if remaining:
                self.own[tick] = remaining
            else:
                del self.own[tick]
        self.remove(tick, lots)

    def flush(self) -> dict[int, int]:
        """The level changes the top-N window shows for this instant."""
        out: dict[int, int] = {}
        if not self.changed:
            return out
        sign, keys, vis, n, qty = self.sign, self.keys, self.vis, self.n_vis, self.qty
        edge = keys[n - 1] if len(keys) >= n else INF
        for t in self.changed:
            q = qty.get(t, 0)
            if q and -sign * t <= edge:
                if vis.get(t) != q:
                    out[t] = q
                    vis[t] = q
            elif t in vis:
                out[t] = 0
                del vis[t]
        if self.membership:
            for k in keys[:n]:
                t = -sign * k
                if t not in vis:
                    vis[t] = out[t] = qty[t]
            if len(vis) > n:
                for t in [t for t in vis if -sign * t > edge]:
                    out[t] = 0
                    del vis[t]
        self.changed.clear()
        self.membership = False
        return out


class Book:
    def __init__(self, profile, n_vis: int):
        self.p = profile
        self.bid, self.ask = Side(1, n_vis), Side(-1, n_vis)
        self.trade_seq = 0
        self.trade_prefix = ""
        self.out: list | None = None  # where events go; None while warming up
        self.taker_lots = 0  # running taker volume, for episode baselines
        # called with the instant after each instant's changes are flushed (the book as the feed
        # shows it): episodes record what the book did without scheduling anything
        self.watchers: list = []

    def side(self, name: str) -> Side:
        return self.bid if name == "bid" else self.ask

    def other(self, name: str) -> Side:
        return self.ask if name == "bid" else self.bid

    def price(self, tick: int) -> float:
        return round(tick * self.p.tick, self.p.price_decimals)

    def qty(self, lots: int) -> float:
        return round(lots * self.p.lot, self.p.qty_decimals)

    def mid2(self):
        """Twice the mid in ticks (an integer), None on an empty side."""
        b, a = self.bid.best(), self.ask.best()
        return None if b is None or a is None else b + a

    def depth(self, side: Side, levels: int) -> int:
        q = side.qty
        return sum(q[-side.sign * k] for k in side.keys[:levels])

    # --- actions -------------------------------------------------------------------
    def add_limit(self, name: str, tick: int, lots: int) -> int:
        """Rest a background limit order, never crossing the other side; the tick used."""
        side, other = self.side(name), self.other(name)
        ob = other.best()
        if ob is not None and (tick - ob) * side.sign >= 0:
            tick = ob - side.sign
        side.add(tick, lots)
        return tick

    def place_own(self, name: str, tick: int, lots: int, ts: int, tag: str = "") -> Order:
        side, other = self.side(name), self.other(name)
        ob = other.best()
        if ob is not None and (tick - ob) * side.sign >= 0:
            tick = ob - side.sign
        o = Order(name, tick, lots, side.qty.get(tick, 0), ts, tag)
        side.own.setdefault(tick, []).append(o)
        side.add(tick, lots)
        return o

    def pull_own(self, o: Order, lots: int | None, ts: int) -> int:
        lots = o.lots if lots is None else min(lots, o.lots)
        if lots <= 0:
            return 0
        side = self.side(o.side)
        o.lots -= lots
        o.cancelled += lots
        o.pulled_ms = ts
        if o.lots == 0:
            orders = [x for x in side.own.get(o.tick, ()) if x is not o]
            if orders:
                side.own[o.tick] = orders
            else:
                side.own.pop(o.tick, None)
        side.remove(o.tick, lots)
        return lots

    def move_own(self, o: Order, tick: int) -> None:
        """Re-peg an order to another price (cancel and re-add as one order for the label)."""
        side = self._detach(o)
        side.remove(o.tick, o.lots)
        o.tick, o.ahead = tick, side.qty.get(tick, 0)
        side.own.setdefault(tick, []).append(o)
        side.add(tick, o.lots)

    def release_own(self, o: Order) -> None:
        """Hand what is left of an order to the background (it simply keeps resting)."""
        self._detach(o)

    def _detach(self, o: Order):
        """Stop tracking `o` as an episode's own order at its price; its side."""
        side = self.side(o.side)
        orders = [x for x in side.own.get(o.tick, ()) if x is not o]
        if orders:
            side.own[o.tick] = orders
        else:
            side.own.pop(o.tick, None)
        return side

    def market(self, taker: str, lots: int, ts: int, limit_tick: int | None = None) -> int:
        """A taker order walking the other side; stops at limit_tick. The lots executed."""
        side = self.ask if taker == BUY else self.bid
        done = 0
        while lots > 0 and side.keys:
            t = side.best()
            if limit_tick is not None and (t - limit_tick) * side.sign < 0:
                break
            if len(side.keys) <= 3:  # never sweep a side empty: a real book refills first
                break
            take = min(lots, side.qty[t])
            side.fill(t, take)
            lots -= take
            done += take
            if self.out is not None:
                self.trade_seq += 1
                self.out.append(Trade(ts, self.price(t), self.qty(take), taker, f"{self.trade_prefix}{self.trade_seq}"))
        self.taker_lots += done
        return done

    # --- the feed ------------------------------------------------------------------
    def flush(self, ts: int) -> None:
        b, a = self.bid.flush(), self.ask.flush()
        if (b or a) and self.out is not None:
            self.out.append(BookDelta(
                ts,
                tuple((self.price(t), self.qty(q)) for t, q in sorted(b.items(), reverse=True)),
                tuple((self.price(t), self.qty(q)) for t, q in sorted(a.items()))))
        if self.watchers:
            for fn in list(self.watchers):
                fn(ts)

    def snapshot(self, ts: int) -> BookSnapshot:
        return BookSnapshot(
            ts,
            tuple((self.price(t), self.qty(q)) for t, q in sorted(self.bid.vis.items(), reverse=True)),
            tuple((self.price(t), self.qty(q)) for t, q in sorted(self.ask.vis.items())))


SIDE_OF_TAKER = {BUY: "ask", SELL: "bid"}
