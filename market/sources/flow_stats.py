"""What a pair's order flow looks like, measured the same way on any event stream (a real
recording or the simulator): the figures the simulator is calibrated against. Plain Python.

`flow_profile(events)` returns rates per second of event time, the shape of depth messages
(levels per message: a market maker re-quoting a ladder changes dozens at once), the
depth profile by level (median quantity of the i-th level, sampled once a second) and how
much the top-10 depth of a side moves (its 10th/90th percentiles against its median: what
"unusually large depth" must stand out from)."""

from __future__ import annotations

from .events import BookDelta, BookLost, BookSnapshot, Trade
from .order_book import levels_apply

LEVEL_INDEXES = (0, 1, 2, 4, 9, 19)


def _quantile(values: list, q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def flow_profile(events) -> dict:
    bids: dict[float, float] = {}
    asks: dict[float, float] = {}
    first = last = None
    trades = messages = updates = near_updates = 0
    trade_qty: list[float] = []
    per_message: list[int] = []
    taker_by_second: dict[int, float] = {}
    samples = {"level": {i: [] for i in LEVEL_INDEXES}, "depth10": [], "spread_bps": [], "mid": []}
    next_sample = None
    for ev in events:
        ts = ev.ts_ms
        if first is None:
            first = ts
        last = ts
        kind = type(ev)
        if kind is Trade:
            trades += 1
            trade_qty.append(ev.qty)
            taker_by_second[ts // 1000] = taker_by_second.get(ts // 1000, 0.0) + ev.qty
        elif kind is BookSnapshot:
            bids = {p: q for p, q in ev.bids}
            asks = {p: q for p, q in ev.asks}
        elif kind is BookLost:
            bids, asks = {}, {}
        elif kind is BookDelta:
            messages += 1
            n = len(ev.bids) + len(ev.asks)
            per_message.append(n)
            updates += n
            if bids and asks:
                mid = 0.5 * (max(bids) + min(asks))
                near = mid * 1e-3  # within 10 bps of the mid
                near_updates += sum(1 for p, _ in ev.bids if mid - p <= near) + \
                    sum(1 for p, _ in ev.asks if p - mid <= near)
            levels_apply(bids, ev.bids)
            levels_apply(asks, ev.asks)
        else:
            continue
        if bids and asks and (next_sample is None or ts >= next_sample):
            next_sample = ts - ts % 1000 + 1000
            top_b = sorted(bids, reverse=True)[:20]
            top_a = sorted(asks)[:20]
            for i in LEVEL_INDEXES:
                for top, book in ((top_b, bids), (top_a, asks)):
                    if i < len(top):
                        samples["level"][i].append(book[top[i]])
            for top, book in ((top_b, bids), (top_a, asks)):
                samples["depth10"].append(sum(book[p] for p in top[:10]))
            mid = 0.5 * (top_b[0] + top_a[0])
            samples["spread_bps"].append((top_a[0] - top_b[0]) / mid * 1e4)
            samples["mid"].append(mid)
    span_s = max(1e-3, ((last or 0) - (first or 0)) / 1000)
    depth10 = samples["depth10"]
    med10 = _quantile(depth10, 0.5)
    seconds = int(span_s) or 1
    taker = list(taker_by_second.values()) + [0.0] * max(0, seconds - len(taker_by_second))
    mids = samples["mid"]
    moves = [abs(b - a) / a * 1e4 for a, b in zip(mids, mids[1:])]
    return {
        "span_s": round(span_s, 1),
        "trades_per_s": round(trades / span_s, 2),
        "depth_messages_per_s": round(messages / span_s, 2),
        "level_updates_per_s": round(updates / span_s, 1),
        "near_level_updates_per_s": round(near_updates / span_s, 1),
        "levels_per_message_p50": _quantile(per_message, 0.5),
        "levels_per_message_p90": _quantile(per_message, 0.9),
        "messages_with_10_levels_share": round(sum(1 for n in per_message if n >= 10) / len(per_message), 3)
        if per_message else 0.0,
        "trade_qty_median": _quantile(trade_qty, 0.5),
        "taker_qty_per_s_median": round(_quantile(taker, 0.5), 8),
        "spread_bps_median": round(_quantile(samples["spread_bps"], 0.5), 3),
        # how the mid moves from one second to the next: real mids stand still, then jump
        "mid_still_share": round(sum(1 for m in moves if m == 0) / len(moves), 3) if moves else 0.0,
        "mid_move_bps_p90": round(_quantile(moves, 0.9), 3),
        "level_qty_median": {i: _quantile(v, 0.5) for i, v in samples["level"].items()},
        "depth10_median": med10,
        "depth10_p10_of_median": round(_quantile(depth10, 0.1) / med10, 3) if med10 else 0.0,
        "depth10_p90_of_median": round(_quantile(depth10, 0.9) / med10, 3) if med10 else 0.0,
    }
