"""The exact consumer of a replaying exchange's frames, in Decimal, written from the
exchanges' documentation and our bar definition (market/sources/bar_builder.py's Rules),
not from the adapter's code. Tests compare what the service stored with it, second by
second.

What an exact Binance consumer holds, from the frames that reached it (`server.log`) and
the REST snapshots it was served (`server.served`):
* a snapshot served with lastUpdateId L becomes the book at the first diff delivered after
  it with U <= L+1 <= u (diffs with u <= L are older than the snapshot); the book is lost
  when a delivered diff does not continue the chain (U != previous u + 1) until then; a
  lost connection (`disconnect` in the log) loses it too: the next connection starts with
  no book, and the loss is said where its book is synced;
* times: diffs at E, trades at T, the snapshot at its first diff's E, a bookTicker at the E
  of the first delivered diff with u >= its u (dropped when that diff came already or no
  book is held); events ordered by time, then by arrival;
* a second [S, S+1000) closes with the book after every event before S+1000: best bid and
  ask, the top 10 levels, and the 1 % depth (levels within 1 % of the mid, each side);
  its quote is the last bookTicker of the second, else the top of the book when the top
  changed in the second, else the quote carried from before (none after a lost book).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

BAND = Decimal("0.01")


@dataclass
class SecondRef:
    ts_ms: int
    trade_count: int = 0
    open: Decimal | None = None
    high: Decimal | None = None
    low: Decimal | None = None
    close: Decimal | None = None
    volume: Decimal = Decimal(0)
    buy_volume: Decimal = Decimal(0)
    sell_volume: Decimal = Decimal(0)
    in_sync: bool = False
    best_bid: Decimal | None = None
    best_ask: Decimal | None = None
    top_bids: list = field(default_factory=list)
    top_asks: list = field(default_factory=list)
    bid_depth: Decimal | None = None
    ask_depth: Decimal | None = None
    bid_price: Decimal | None = None
    ask_price: Decimal | None = None


def _binance_events(log, served, key):
    """[(ts, arrival, kind, payload)] of what an exact client made of the frames."""
    out, arrival = [], 0
    snapshots = sorted((s for s in served if s.key == key), key=lambda s: s.index)
    pending_snapshot, synced, last_u, tickers = None, False, None, []
    next_snapshot = 0
    # a connection ended: the next one starts with no book. The loss is said where that
    # connection's book is synced, in its second: the feed says it where it noticed, between
    # the two, and a second without a book sample is not compared
    reconnected = False
    for index, sent in enumerate(log):
        while next_snapshot < len(snapshots) and snapshots[next_snapshot].index <= index:
            pending_snapshot = snapshots[next_snapshot]
            next_snapshot += 1
            synced, tickers = False, []
        if sent.key == key and sent.kind == "disconnect":
            reconnected = reconnected or synced
            pending_snapshot, synced, tickers = None, False, []
            continue
        if sent.key != key or not sent.delivered:
            continue
        data = sent.data
        arrival += 1
        if sent.kind == "trade":
            out.append((data["T"], arrival, "trade", data))
        elif sent.kind == "ticker":
            if synced and data["u"] > last_u:
                tickers.append(data)
        elif sent.kind == "depth":
            if not synced:
                if pending_snapshot is None or data["u"] <= pending_snapshot.last_update_id:
                    continue
                if data["U"] > pending_snapshot.last_update_id + 1:
                    pending_snapshot = None
                    continue
                if reconnected:
                    out.append((data["E"], arrival, "lost", None))
                    reconnected = False
                out.append((data["E"], arrival, "snapshot", pending_snapshot))
                synced, pending_snapshot = True, None
            elif data["U"] != last_u + 1:
                out.append((out[-1][0] if out else data["E"], arrival, "lost", None))
                synced, tickers = False, []
                continue
            last_u = data["u"]
            for ticker in [t for t in tickers if t["u"] <= data["u"]]:
                out.append((data["E"], arrival, "quote", ticker))
            tickers = [t for t in tickers if t["u"] > data["u"]]
            out.append((data["E"], arrival, "diff", data))
    out.sort(key=lambda item: (item[0], item[1]))
    return out


def binance_reference(server, key: str, until_ms: int | None = None) -> dict[int, SecondRef]:
    """Per second, what an exact consumer of `key`'s delivered frames holds: from the
    second of the first event through the last event's, or through `until_ms` (exclusive)
    when later. The service closes seconds by the clock too, so a second after the replay
    ended has a bar: no trades, and the book as the last event left it."""
    events = _binance_events(server.log, server.served, key)
    if not events:
        return {}
    seconds: dict[int, SecondRef] = {}
    bids: dict[Decimal, Decimal] = {}
    asks: dict[Decimal, Decimal] = {}
    synced = False
    carried = (None, None)
    start = events[0][0] - events[0][0] % 1000
    end = events[-1][0] - events[-1][0] % 1000 + 1000
    if until_ms is not None:
        end = max(end, until_ms - until_ms % 1000 + (1000 if until_ms % 1000 else 0))
    i = 0
    for second in range(start, end, 1000):
        ref = seconds[second] = SecondRef(second)
        explicit = None
        top_changed = False
        while i < len(events) and events[i][0] < second + 1000:
            _, _, kind, payload = events[i]
            i += 1
            before = (max(bids) if bids else None, min(asks) if asks else None,
                      bids.get(max(bids)) if bids else None, asks.get(min(asks)) if asks else None)
            if kind == "trade":
                price, qty = Decimal(payload["p"]), Decimal(payload["q"])
                ref.trade_count += 1
                ref.open = price if ref.open is None else ref.open
                ref.high = price if ref.high is None else max(ref.high, price)
                ref.low = price if ref.low is None else min(ref.low, price)
                ref.close = price
                ref.volume += qty
                if payload["m"]:
                    ref.sell_volume += qty
                else:
                    ref.buy_volume += qty
                continue
            if kind == "quote":
                explicit = (Decimal(payload["b"]), Decimal(payload["a"]))
                continue
            if kind == "lost":
                bids, asks, synced, carried, top_changed = {}, {}, False, (None, None), False
                explicit = None
                continue
            if kind == "snapshot":
                bids = {p: Decimal(q) for p, (_, q) in payload.bids.items()}
                asks = {p: Decimal(q) for p, (_, q) in payload.asks.items()}
                synced = True
            elif kind == "diff":
                for side, levels in ((bids, payload["b"]), (asks, payload["a"])):
                    for p, q in levels:
                        if Decimal(q) == 0:
                            side.pop(Decimal(p), None)
                        else:
                            side[Decimal(p)] = Decimal(q)
            after = (max(bids) if bids else None, min(asks) if asks else None,
                     bids.get(max(bids)) if bids else None, asks.get(min(asks)) if asks else None)
            if after != before and bids and asks:
                top_changed = True
        if explicit is not None:
            carried = explicit
        elif top_changed:
            carried = (max(bids), min(asks))
        ref.bid_price, ref.ask_price = carried
        ref.in_sync = synced and bool(bids) and bool(asks)
        if ref.in_sync:
            ref.best_bid, ref.best_ask = max(bids), min(asks)
            ref.top_bids = [(p, bids[p]) for p in sorted(bids, reverse=True)[:10]]
            ref.top_asks = [(p, asks[p]) for p in sorted(asks)[:10]]
            mid = (ref.best_bid + ref.best_ask) / 2
            ref.bid_depth = sum((q for p, q in bids.items() if p >= mid * (1 - BAND)), Decimal(0))
            ref.ask_depth = sum((q for p, q in asks.items() if p <= mid * (1 + BAND)), Decimal(0))
    return seconds
