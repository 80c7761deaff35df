"""Scheme detectors on hand-built event sequences (no database)."""

import pickle

import pytest

from market.sources.events import BookDelta, BookSnapshot, PairRef, Trade
from schemes.detectors import DetectorEngine, SchemeEvent, engine, flipping, layering, vacuuming
from schemes.detectors.book import cancel_attributed

PAIR = PairRef("test", "AAA", "USD")
TICK = 0.01
T0 = 1_717_243_200_000


def px(t):
    return round(t * TICK, 2)


def book(bid_top=10000, ask_top=10002, n=30, q=10.0, far_q=None, touch_q=None):
    """Levels of q; from the sixth level on, of far_q if given; the best of touch_q if given."""
    def size(i):
        if i == 0 and touch_q is not None:
            return touch_q
        return q if far_q is None or i < 5 else far_q

    bids = tuple((px(bid_top - i), size(i)) for i in range(n))
    asks = tuple((px(ask_top + i), size(i)) for i in range(n))
    return bids, asks


def ask_churn_events(start, end, qty):
    """The fifth ask level loses qty to a cancel every 250 ms and gets it back 100 ms later:
    a market maker re-quoting."""
    evs = []
    for ts in range(start + 50, end, 250):
        evs += [BookDelta(ts, asks=((px(10006), 10.0 - qty),)), BookDelta(ts + 100, asks=((px(10006), 10.0),))]
    return evs


def warm_engine(minutes=3, far_q=None, trade_q=1.0, batch_ms=0, touch_q=None, ask_churn=0.0):
    """An engine with baselines learnt on a calm book (levels of 10, a trade of trade_q a
    second: the typical taker second; ask_churn: see ask_churn_events)."""
    eng = DetectorEngine(PAIR, tick_size=TICK, distance_scale=1.0, batch_ms=batch_ms)
    evs = []
    for m in range(minutes):
        t = T0 + m * 60_000
        bids, asks = book(far_q=far_q, touch_q=touch_q)
        evs.append(BookSnapshot(t, bids, asks))
        for s in range(60):
            ts = t + s * 1000 + 500
            evs.append(Trade(ts, px(10002), trade_q, "buy"))
            evs.append(BookDelta(ts, (), ((px(10002), 10.0 - trade_q),)))
            evs.append(BookDelta(ts + 100, (), ((px(10002), 10.0),)))
        if ask_churn:
            evs += ask_churn_events(t, t + 60_000, ask_churn)
    evs.sort(key=lambda e: e.ts_ms)
    out = eng.feed_many(evs)
    assert out == []
    return eng, T0 + minutes * 60_000


def snapshot(t):
    bids, asks = book()
    return BookSnapshot(t, bids, asks)


def run(eng, events):
    return eng.feed_many(events)


def layering_events(t, side="ask"):
    """Four large asks 2..5 ticks behind the touch, resting 5 s, pulled together."""
    evs = [snapshot(t)]
    levels = [10004, 10005, 10006, 10007] if side == "ask" else [9998, 9997, 9996, 9995]
    for i, tk in enumerate(levels):
        d = BookDelta(t + 1000 + 200 * i, **{side + "s": ((px(tk), 110.0),)})
        evs.append(d)
    for i, tk in enumerate(levels):
        evs.append(BookDelta(t + 7000 + 100 * i, **{side + "s": ((px(tk), 10.0),)}))
    evs.append(Trade(t + 8500, px(10002), 1.0, "buy"))  # the market goes on: the collapse is over
    return evs


def test_large_asks_that_price_came_to_and_ran_through_are_not_layers(monkeypatch):
    """The four large asks rest 5 s; then price rises through the book: each ask's level
    goes whole as it becomes the best (a stale quote run over), no pull."""
    def ran_through(t):
        evs = [e for e in layering_events(t) if not (isinstance(e, BookDelta) and e.ts_ms >= t + 7000)]
        gone = tuple((px(tk), 0.0) for tk in range(10002, 10008))
        return evs[:-1] + [BookDelta(t + 7000, asks=gone), evs[-1]]

    eng, t = warm_engine()
    assert run(eng, ran_through(t)) == []
    monkeypatch.setattr(DetectorEngine, "ran_over", lambda self, rec, ts: False)
    eng, t = warm_engine()
    assert [e.scheme for e in run(eng, ran_through(t))] == ["layering"]


def test_layering_detected_with_side_and_direction():
    eng, t = warm_engine()
    out = run(eng, layering_events(t, "ask"))
    assert [e.scheme for e in out] == ["layering"]
    e = out[0]
    assert e.side == "ask" and e.direction == "down"
    assert 0 < e.confidence <= 0.95 and 0 <= e.alert_score <= 100
    assert e.build["levels"] >= 2 and e.collapse["cancel_ratio"] > 0.9
    assert e.key == ("layering", "ask", t + 1000)
    d = e.to_dict()
    assert d["scheme"] == "layering" and "build" in d and "collapse" in d

    eng, t = warm_engine()
    out = run(eng, layering_events(t, "bid"))
    assert [(e.scheme, e.side, e.direction) for e in out] == [("layering", "bid", "up")]


def test_flipping_aggressive_bid_spoof_pushes_up():
    eng, t = warm_engine()
    evs = [snapshot(t),
           BookDelta(t + 1000, bids=((px(10000), 130.0),)),  # joins the touch: 10 -> 130
           BookDelta(t + 4000, bids=((px(10000), 12.0),)),  # pulled
           Trade(t + 4100, px(10000), 12.0, "sell"),  # then sells into the bid
           Trade(t + 4100, px(9999), 10.0, "sell"),
           Trade(t + 4100, px(9998), 10.0, "sell"),
           BookDelta(t + 4100, bids=((px(10000), 0.0), (px(9999), 0.0), (px(9998), 0.0)))]
    out = run(eng, evs)
    assert [(e.scheme, e.side, e.direction) for e in out] == [("flipping", "bid", "up")]
    assert out[0].collapse["flip_mode"] == "aggressive"
    assert out[0].collapse["flip_latency_ms"] == 100


def later_update(ts):
    """An unrelated small change far from the touch: the book's next update."""
    return BookDelta(ts, asks=((px(10020), 10.5),))


def test_flipping_mirror_ask_spoof_pushes_down():
    eng, t = warm_engine()
    evs = [snapshot(t),
           BookDelta(t + 1000, asks=((px(10003), 120.0),)),
           BookDelta(t + 3000, asks=((px(10003), 10.0),)),
           BookDelta(t + 3050, bids=((px(10001), 80.0),)),  # mirror: rests on the bid at the touch
           later_update(t + 3200)]
    assert run(eng, evs) == []  # not yet: the mirror has not rested
    out = run(eng, [later_update(t + 3600)])
    assert [(e.scheme, e.side, e.direction) for e in out] == [("flipping", "ask", "down")]
    assert out[0].collapse["flip_mode"] == "mirror"
    assert out[0].collapse["flip_latency_ms"] == 50
    assert out[0].ts_ms == t + 3600


def test_on_a_netted_feed_a_mirror_shows_net_of_its_levels_other_cancels():
    """An ask of 110 is pulled and, within 100 ms, a bid of 76 (69 % of it) joins the best
    bid while 8 of that level's queue is cancelled. A netted feed shows one change there,
    +68 (62 %): the batch nets the queue's own cancels into the mirror's add, so there the
    mirror may fall 5 points short of 65 %. On a per-event feed an add of 68 is the whole
    order and too small a mirror."""
    def found(batch_ms):
        eng, t = warm_engine(batch_ms=batch_ms)
        evs = [snapshot(t), BookDelta(t + 1000, asks=((px(10003), 120.0),)), BookDelta(t + 3000, asks=((px(10003), 10.0),)),
               BookDelta(t + 3100, bids=((px(10000), 78.0),)), later_update(t + 3700)]
        return [(e.scheme, e.side) for e in run(eng, evs)]

    assert found(batch_ms=100) == [("flipping", "ask")]
    assert found(batch_ms=0) == []


def test_a_mirror_withdrawn_before_it_rests_is_not_flipping():
    """A mirror that goes again within 500 ms never rested on the other side: a quote
    flickering through the touch, not a flipped order."""
    eng, t = warm_engine()
    evs = [snapshot(t),
           BookDelta(t + 1000, asks=((px(10003), 120.0),)),
           BookDelta(t + 3000, asks=((px(10003), 10.0),)),
           BookDelta(t + 3050, bids=((px(10001), 80.0),)),
           BookDelta(t + 3400, bids=((px(10001), 10.0),)),
           later_update(t + 3600)]
    assert run(eng, evs) == []


def test_cancels_while_the_mirror_rests_do_not_make_a_flip_a_vacuum():
    """The side's other levels losing 60 after the mirror came (more than the pulled 50 and
    over 30 % of the usual top-10 depth) is the book's flow while the mirror rests: whether
    the order was pulled with its side is judged at the flip."""
    eng, t = warm_engine()
    evs = [snapshot(t),
           BookDelta(t + 1000, asks=((px(10003), 60.0),)),
           BookDelta(t + 2200, asks=((px(10003), 10.0),)),
           BookDelta(t + 2250, bids=((px(10001), 40.0),)),
           BookDelta(t + 2400, asks=tuple((px(10004 + i), 0.0) for i in range(6))),
           later_update(t + 2800)]
    assert [(e.scheme, e.side) for e in run(eng, evs)] == [("flipping", "ask")]


def test_an_order_gone_within_100_ms_is_not_flipping():
    """A bid of 120 that leaves 80 ms after it came was hardly seen: it misled nobody,
    though 30 is then sold into the bids."""
    def flip_after(life_ms):
        eng, t = warm_engine()
        pull = t + 1000 + life_ms
        return run(eng, [snapshot(t), BookDelta(t + 1000, bids=((px(10000), 130.0),)),
                         BookDelta(pull, bids=((px(10000), 10.0),)),
                         Trade(pull + 100, px(10000), 10.0, "sell"), Trade(pull + 100, px(9999), 10.0, "sell"),
                         Trade(pull + 100, px(9998), 10.0, "sell"),
                         BookDelta(pull + 100, bids=((px(10000), 0.0), (px(9999), 0.0), (px(9998), 0.0)))])

    assert flip_after(80) == []
    assert [(e.scheme, e.side) for e in flip_after(150)] == [("flipping", "bid")]


def test_an_aggressive_flip_is_the_large_taker_orders_not_the_crowds_small_ones():
    """30 sold into the bids within 800 ms of a pull of 120: as six orders of 5 typical
    taker seconds each (a flip split into a few orders), or as one order, it is a flip; as
    sixty orders of half a taker second (the crowd's flow) it is not."""
    def sells(orders):
        eng, t = warm_engine()
        evs = [snapshot(t), BookDelta(t + 1000, bids=((px(10000), 130.0),)),
               BookDelta(t + 4000, bids=((px(10000), 40.0),))]
        left = 40.0
        for ts, qty in orders:
            left -= qty
            evs += [Trade(t + ts, px(10000), qty, "sell"), BookDelta(t + ts, bids=((px(10000), left),))]
        return run(eng, evs)

    assert [(e.scheme, e.side) for e in sells([(4100 + 100 * i, 5.0) for i in range(6)])] == [("flipping", "bid")]
    assert [(e.scheme, e.side) for e in sells([(4100, 5.0)] * 6)] == [("flipping", "bid")]
    assert sells([(4100 + 10 * i, 0.5) for i in range(60)]) == []


def sell_into_bids(ts, top=9999):
    """30 sold at once into the three bid levels from `top` down (levels of 10)."""
    return [Trade(ts, px(top - i), 10.0, "sell") for i in range(3)] + [
        BookDelta(ts, bids=tuple((px(top - i), 0.0) for i in range(3)))]


def test_a_spoof_alone_at_the_best_level_is_flipping_when_its_pull_empties_it():
    """A bid of 120 improves the touch by a tick, so it is the whole best level; its pull
    empties that level, and it is the order's pull (price never came to it), not price
    running through a level."""
    eng, t = warm_engine()
    evs = [snapshot(t), BookDelta(t + 1000, bids=((px(10001), 120.0),)),
           BookDelta(t + 4000, bids=((px(10001), 0.0),))] + sell_into_bids(t + 4100)
    out = run(eng, evs)
    assert [(e.scheme, e.side, e.direction) for e in out] == [("flipping", "bid", "up")]
    assert out[0].build["distance_ticks_min"] == -1.0


@pytest.mark.parametrize("behind, flipped", [(4, True), (5, False)])
def test_a_flipped_order_may_stand_four_scaled_ticks_behind_the_touch_not_five(behind, flipped):
    """DETECTION.md's 0-2 ticks, in our volatility unit, which runs below the simulator's on
    calm books (docs/DETECTION_METHOD.md, "The distance unit of a calm book"): an order
    four units behind the touch is near it, five is not."""
    eng, t = warm_engine()
    level = 10000 - behind
    evs = [snapshot(t), BookDelta(t + 1000, bids=((px(level), 130.0),)),
           BookDelta(t + 4000, bids=((px(level), 10.0),))] + sell_into_bids(t + 4100, top=10000)
    out = run(eng, evs)
    assert [(e.scheme, e.side) for e in out] == ([("flipping", "bid")] if flipped else [])


def test_an_order_stepping_deep_into_the_spread_is_not_flipping():
    """Three ticks inside a wide spread a large bid is an order meant to trade (price runs
    over such orders within moments), not one near the touch to mislead."""
    eng, t = warm_engine()
    bids, asks = book(ask_top=10006)
    evs = [BookSnapshot(t, bids, asks), BookDelta(t + 1000, bids=((px(10003), 120.0),)),
           BookDelta(t + 4000, bids=((px(10003), 0.0),))] + sell_into_bids(t + 4100, top=10000)
    assert run(eng, evs) == []


def test_a_large_order_emptied_once_price_came_to_it_is_not_flipping():
    """A bid of 120 two ticks behind the touch; the two levels ahead of it go, so price
    has come to it; then the whole level goes at once: price running through a stale
    quote, not a pull."""
    eng, t = warm_engine()
    evs = [snapshot(t), BookDelta(t + 1000, bids=((px(9998), 130.0),)),
           Trade(t + 3000, px(10000), 10.0, "sell"), Trade(t + 3000, px(9999), 10.0, "sell"),
           BookDelta(t + 3000, bids=((px(10000), 0.0), (px(9999), 0.0))),
           BookDelta(t + 4000, bids=((px(9998), 0.0),))] + sell_into_bids(t + 4100, top=9997)
    assert run(eng, evs) == []


def test_on_a_netted_feed_a_flip_printed_in_the_batch_that_shows_the_pull_counts():
    """Netted in 100 ms batches, the pull and the sells that follow it within the batch
    arrive as trades first and one delta after: the sells are the flip."""
    eng, t = warm_engine(batch_ms=100)
    evs = [snapshot(t), BookDelta(t + 1000, bids=((px(10000), 130.0),)),
           Trade(t + 4030, px(9999), 10.0, "sell"), Trade(t + 4030, px(9998), 10.0, "sell"),
           Trade(t + 4030, px(9997), 10.0, "sell"),
           BookDelta(t + 4100, bids=((px(10000), 10.0), (px(9999), 0.0), (px(9998), 0.0), (px(9997), 0.0)))]
    out = run(eng, evs)
    assert [(e.scheme, e.side) for e in out] == [("flipping", "bid")]
    assert out[0].collapse["flip_latency_ms"] == 0


def netted_bid_flip(t, life_ms, other_adds=()):
    """Netted in 100 ms batches: a bid of 120 joins the touch, is pulled life_ms later in a
    batch that also shows the sells into the bids (and other_adds: (tick, qty) put on other
    bid levels in that batch)."""
    pull = t + 1000 + life_ms
    return [snapshot(t), BookDelta(t + 1000, bids=((px(10000), 130.0),)),
            Trade(pull - 70, px(9999), 10.0, "sell"), Trade(pull - 70, px(9998), 10.0, "sell"),
            Trade(pull - 70, px(9997), 10.0, "sell"),
            BookDelta(pull, bids=((px(10000), 10.0), (px(9999), 0.0), (px(9998), 0.0), (px(9997), 0.0),
                                  *((px(tk), 10.0 + q) for tk, q in other_adds)))]


def test_on_a_netted_feed_an_order_in_one_published_book_only_is_not_flipping():
    eng, t = warm_engine(batch_ms=100)
    assert run(eng, netted_bid_flip(t, 100)) == []
    eng, t = warm_engine(batch_ms=100)
    assert [(e.scheme, e.side) for e in run(eng, netted_bid_flip(t, 200))] == [("flipping", "bid")]


def test_a_pull_in_a_batch_with_the_sides_own_small_adds_is_no_move(monkeypatch):
    """The batch that pulls the bid of 120 also adds 12 to each of eight deeper bid levels
    (96 in all, 80 % of the order): the book's own flow, not the order put back."""
    small_adds = [(9990 - i, 12.0) for i in range(8)]
    eng, t = warm_engine(batch_ms=100)
    assert [(e.scheme, e.side) for e in run(eng, netted_bid_flip(t, 3000, small_adds))] == [("flipping", "bid")]
    monkeypatch.setattr(engine, "MOVED_MIN_PIECE", 0.0)
    eng, t = warm_engine(batch_ms=100)
    assert run(eng, netted_bid_flip(t, 3000, small_adds)) == []


def test_an_order_re_placed_beyond_the_sides_twenty_best_levels_was_withdrawn_not_moved():
    """The batch that pulls the bid of 120 adds 110 on one other bid level: among the side's
    ten best that is the order moved; 22 levels deep, where no one reads the book, it is
    the order withdrawn (and the flip is found)."""
    eng, t = warm_engine(batch_ms=100)
    assert run(eng, netted_bid_flip(t, 3000, [(9990, 110.0)])) == []
    eng, t = warm_engine(batch_ms=100)
    assert [(e.scheme, e.side) for e in run(eng, netted_bid_flip(t, 3000, [(9975, 110.0)]))] == [("flipping", "bid")]


def aggressive_bid_flip(t, size, next_levels=10.0):
    """A bid of `size` joins the touch (a level of 10), is pulled 3 s later, and 30 is sold
    into the bids at once."""
    return [BookDelta(t + 1000, bids=((px(10000), 10.0 + size),)),
            BookDelta(t + 4000, bids=((px(10000), 10.0),)),
            Trade(t + 4100, px(10000), 10.0, "sell"),
            Trade(t + 4100, px(9999), 10.0, "sell"),
            Trade(t + 4100, px(9998), 10.0, "sell"),
            BookDelta(t + 4100, bids=((px(10000), 0.0), (px(9999), next_levels - 10.0),
                                      (px(9998), next_levels - 10.0)))]


def test_a_flip_pulled_with_two_large_orders_at_one_other_price_is_still_flipping():
    """Two bids of 40 join the level 9995 and are pulled with the bid of 120: one other
    price is no ladder of layers. At two other prices they are (and the pull is no flip)."""
    def flip_with(prices):
        evs = [snapshot(t)] + aggressive_bid_flip(t, 120.0)
        level: dict = {}
        for i, tk in enumerate(prices):
            level[tk] = level.get(tk, 10.0) + 40.0
            evs.insert(2 + i, BookDelta(t + 1100 + 100 * i, bids=((px(tk), level[tk]),)))
        evs.insert(2 + len(prices), BookDelta(t + 3900, bids=tuple((px(tk), 10.0) for tk in level)))
        return [(e.scheme, e.side) for e in run(eng, evs)]

    eng, t = warm_engine()
    assert flip_with([9995, 9995]) == [("flipping", "bid")]
    eng, t = warm_engine()
    assert flip_with([9995, 9994]) == []


def test_large_orders_pulled_beyond_layerings_reach_do_not_make_a_flip_layers():
    """Two bids of 40 at 28 and 29 ticks behind the touch, past the 25 (scaled) ticks within
    which layering counts a layer, are pulled with the bid of 120: no scheme's ladder, so
    the pull is still judged as a flip."""
    eng, t = warm_engine()
    evs = [snapshot(t)] + aggressive_bid_flip(t, 120.0)
    evs[2:2] = [BookDelta(t + 1100, bids=((px(9972), 50.0),)), BookDelta(t + 1200, bids=((px(9971), 50.0),)),
                BookDelta(t + 3900, bids=((px(9972), 10.0), (px(9971), 10.0)))]
    assert [(e.scheme, e.side) for e in run(eng, evs)] == [("flipping", "bid")]


def test_flipping_weighs_the_order_against_the_book_as_it_stood():
    """An order of 60 is 12 % of the usual top-20 depth of 500 but 30 % of the book when
    the deep levels have thinned out: what the market saw was a large order."""
    eng, t = warm_engine(far_q=30.0)
    bids, asks = book()  # the deep levels thin out to 10
    out = run(eng, [BookSnapshot(t, bids, asks)] + aggressive_bid_flip(t, 60.0))
    assert [(e.scheme, e.side, e.direction) for e in out] == [("flipping", "bid", "up")]


def test_an_order_small_against_a_thick_book_is_not_flipping():
    """40 is four typical levels and 20 % of the usual depth, but under 7 % of the book
    as it stood, three times deeper than usual."""
    eng, t = warm_engine()
    bids, asks = book(q=30.0)
    bids = ((px(10000), 10.0),) + bids[1:]
    assert run(eng, [BookSnapshot(t, bids, asks)] + aggressive_bid_flip(t, 40.0, next_levels=30.0)) == []


def test_a_mirror_much_smaller_than_the_pulled_order_is_not_flipping():
    eng, t = warm_engine()
    evs = [snapshot(t),
           BookDelta(t + 1000, asks=((px(10003), 120.0),)),
           BookDelta(t + 3000, asks=((px(10003), 10.0),)),
           BookDelta(t + 3050, bids=((px(10001), 60.0),)),  # 55 % of the pulled 110
           later_update(t + 3600)]
    assert run(eng, evs) == []


def test_an_order_worn_down_by_small_cancels_is_not_flipping():
    """A large bid that loses four small slices (the queue's own cancels) and then its
    last half was not pulled in one go: no flip, though 30 is then sold into the bids."""
    eng, t = warm_engine()
    evs = [snapshot(t), BookDelta(t + 1000, bids=((px(10000), 130.0),))]
    evs += [BookDelta(t + 1500 + 400 * k, bids=((px(10000), 115.0 - 15.0 * k),)) for k in range(4)]
    evs += aggressive_bid_flip(t, 120.0)[1:]  # the rest (60 of 120) goes at t + 4000, then the sells
    assert run(eng, evs) == []


def test_cancels_on_other_levels_before_the_pull_are_counted_once():
    """60 cancelled on the bid's other levels just before a pull of 100 is less than the
    order: a flip, not a side being vacuumed (counting those cancels again when the flip
    prints made them 120)."""
    eng, t = warm_engine(far_q=30.0)
    evs = [BookSnapshot(t, *book(far_q=30.0)), BookDelta(t + 1000, bids=((px(10000), 110.0),)),
           BookDelta(t + 3600, bids=((px(9995), 0.0), (px(9994), 0.0))),  # 2 x 30 elsewhere
           BookDelta(t + 4000, bids=((px(10000), 10.0),)),
           Trade(t + 4100, px(10000), 10.0, "sell"), Trade(t + 4100, px(9999), 10.0, "sell"),
           Trade(t + 4100, px(9998), 10.0, "sell"),
           BookDelta(t + 4100, bids=((px(10000), 0.0), (px(9999), 0.0), (px(9998), 0.0)))]
    out = run(eng, evs)
    assert [(e.scheme, e.side) for e in out] == [("flipping", "bid")]


def test_the_flipped_order_itself_does_not_make_its_side_look_vacuumed(monkeypatch):
    """A bid of 120 at the touch doubles the side's top-10 depth (100 -> 220) while a market
    maker re-quotes a deeper bid level (10 cancelled and put back every 50 ms, 140 in the
    pull's window): the side re-quotes and stays. Read as a side elevated by others, whose
    every cancel counts, those cancels were a vacuum and the flip was dropped."""
    def churned_flip():
        eng, t = warm_engine()
        evs = [snapshot(t), *aggressive_bid_flip(t, 120.0)]
        for ts in range(t + 3300, t + 4000, 50):
            evs += [BookDelta(ts, bids=((px(9995), 0.0),)), BookDelta(ts + 10, bids=((px(9995), 10.0),))]
        return run(eng, sorted(evs, key=lambda e: e.ts_ms))

    assert [(e.scheme, e.side) for e in churned_flip()] == [("flipping", "bid")]
    real = vacuuming.VacuumingDetector.cancelled_elsewhere
    monkeypatch.setattr(vacuuming.VacuumingDetector, "cancelled_elsewhere",
                        lambda self, side, price, since, usual, own_qty: real(self, side, price, since, usual, 0.0))
    assert churned_flip() == []


def test_a_few_ordinary_cancels_elsewhere_do_not_make_a_flip_a_vacuum():
    """29 cancelled on three other bid levels around a pull of 29 matches the pull, but is
    under 30 % of the side's usual top-10 depth of 100: the book's own flow."""
    eng, t = warm_engine()
    evs = [snapshot(t), BookDelta(t + 1000, bids=((px(10000), 46.0),)),  # 36 joins the touch
           BookDelta(t + 3700, bids=((px(9997), 0.0), (px(9996), 0.0), (px(9995), 1.0))),
           BookDelta(t + 4000, bids=((px(10000), 17.0),)),  # 29 of it pulled in one cancel
           Trade(t + 4100, px(10000), 10.0, "sell"),
           BookDelta(t + 4100, bids=((px(10000), 7.0),))]
    assert [(e.scheme, e.side) for e in run(eng, evs)] == [("flipping", "bid")]


def test_levels_re_quoted_around_a_pull_do_not_make_a_flip_a_vacuum(monkeypatch):
    """Three bid levels of 10 behind a pull of 29 are cancelled and placed again two ticks
    lower 50 ms later (a ladder following the touch): 30 cancelled, as much as the pull and
    30 % of the side's usual depth, but all of it put back, so the side stayed and the pull
    is a flip. Counted without what was put back (as for a side standing at twice its usual
    depth), the same cancels veto it."""
    def found(other_elevated):
        monkeypatch.setattr(vacuuming, "VAC_OTHER_ELEVATED", other_elevated)
        eng, t = warm_engine()
        evs = [snapshot(t), BookDelta(t + 1000, bids=((px(10000), 46.0),)),  # 36 joins the touch
               BookDelta(t + 3700, bids=((px(9997), 0.0), (px(9996), 0.0), (px(9995), 0.0))),
               BookDelta(t + 3750, bids=((px(9993), 20.0), (px(9992), 20.0), (px(9991), 20.0))),
               BookDelta(t + 4000, bids=((px(10000), 17.0),)),  # 29 of it pulled in one cancel
               Trade(t + 4100, px(10000), 10.0, "sell"),
               BookDelta(t + 4100, bids=((px(10000), 7.0),))]
        return [(e.scheme, e.side) for e in run(eng, evs)]

    assert found(vacuuming.VAC_OTHER_ELEVATED) == [("flipping", "bid")]
    assert found(0.0) == []


def test_a_flip_of_a_few_taker_seconds_is_the_book_s_own_flow():
    """12 sold into the bids after a pull of 40 is 30 % of the order but three typical
    taker seconds (4 a second here): busy books print that much without any flip."""
    eng, t = warm_engine(trade_q=4.0)
    evs = [snapshot(t), BookDelta(t + 1000, bids=((px(10000), 50.0),)),
           BookDelta(t + 4000, bids=((px(10000), 10.0),)),
           Trade(t + 4100, px(10000), 10.0, "sell"), Trade(t + 4100, px(9999), 2.0, "sell"),
           BookDelta(t + 4100, bids=((px(10000), 0.0), (px(9999), 8.0)))]
    assert run(eng, evs) == []


def test_a_mirror_of_a_few_taker_seconds_is_not_flipping():
    """A mirror of 46 matches 66 % of the pulled 70 but is under 5 typical taker seconds
    (10 a second here): a quote of the usual flow's size, not a flipped order. One of 60
    (6 taker seconds) is a flip, as an aggressive flip of that many taker seconds would be."""
    def mirror_after_pull(mirror):
        eng, t = warm_engine(trade_q=10.0)
        return run(eng, [snapshot(t), BookDelta(t + 1000, asks=((px(10003), 80.0),)),
                         BookDelta(t + 3000, asks=((px(10003), 10.0),)),
                         BookDelta(t + 3050, bids=((px(10001), mirror),)), later_update(t + 3600)])

    assert mirror_after_pull(46.0) == []
    assert [(e.scheme, e.side) for e in mirror_after_pull(60.0)] == [("flipping", "ask")]


def vacuum_events(t, two_sided=False):
    evs = [snapshot(t)]
    sides = ("bids", "asks") if two_sided else ("bids",)
    tks = {"bids": [10000, 9999, 9998, 9997], "asks": [10002, 10003, 10004, 10005]}
    for i in range(4):
        evs.append(BookDelta(t + 1000 + 300 * i, **{s: ((px(tks[s][i]), 60.0),) for s in sides}))
    for i in range(4):  # pulled within a third of a second
        evs.append(BookDelta(t + 6000 + 100 * i, **{s: ((px(tks[s][i]), 10.0),) for s in sides}))
    evs.append(BookDelta(t + 6700, bids=((px(10000), 0.0), (px(9999), 0.0))))  # price moves into the gap
    return evs


def test_vacuuming_pulled_bids_point_down():
    eng, t = warm_engine()
    out = run(eng, vacuum_events(t))
    assert [(e.scheme, e.side, e.direction) for e in out] == [("vacuuming", "bid", "down")]
    assert out[0].collapse["depth_drop"] > 0


def uneven_vacuum_events(t, extra, pulls):
    """Bids raised by extra[i] on the best levels, then cut back by (delay ms, level, qty)
    pulls, and price moves into the gap."""
    evs = [snapshot(t)]
    depth = {}
    for i, q in enumerate(extra):
        depth[10000 - i] = 10.0 + q
        evs.append(BookDelta(t + 1000 + 300 * i, bids=((px(10000 - i), depth[10000 - i]),)))
    for delay, level, q in pulls:
        depth[level] -= q
        evs.append(BookDelta(t + 6000 + delay, bids=((px(level), depth[level]),)))
    evs.append(BookDelta(t + 6700, bids=((px(10000), 0.0), (px(9999), 0.0))))
    return evs


def test_a_side_pulled_by_three_orders_is_vacuuming():
    eng, t = warm_engine()
    evs = uneven_vacuum_events(t, [55.0, 55.0, 50.0], [(0, 10000, 55.0), (200, 9999, 55.0), (400, 9998, 50.0)])
    assert [(e.scheme, e.side) for e in run(eng, evs)] == [("vacuuming", "bid")]


def test_depth_pushed_out_of_the_ten_best_levels_by_small_bids_in_front_is_still_pulled():
    """Bids raised to 60 on levels 4-7; buyers lift five ask levels and five small bids
    follow price up in front, so two of the raised levels stand 11th and 12th when all four
    are pulled. They made the depth's peak, so their cancels are the pull's."""
    eng, t = warm_engine()
    raised = [9997, 9996, 9995, 9994]
    evs = [snapshot(t)]
    evs += [BookDelta(t + 1000 + 300 * i, bids=((px(tk), 60.0),)) for i, tk in enumerate(raised)]
    lifted = range(10002, 10007)
    evs += [Trade(t + 5700, px(tk), 10.0, "buy") for tk in lifted]
    evs.append(BookDelta(t + 5700, asks=tuple((px(tk), 0.0) for tk in lifted)))
    evs.append(BookDelta(t + 5800, bids=tuple((px(tk), 1.0) for tk in range(10001, 10006))))
    evs += [BookDelta(t + 6000 + 100 * i, bids=((px(tk), 10.0),)) for i, tk in enumerate(raised)]
    hit = range(10005, 9990, -1)  # sellers take the bids down to 9991: price falls into the gap
    evs += [Trade(t + 6500, px(tk), 1.0 if tk > 10000 else 10.0, "sell") for tk in hit]
    evs.append(BookDelta(t + 6500, bids=tuple((px(tk), 0.0) for tk in hit)))
    assert [(e.scheme, e.side) for e in run(eng, evs)] == [("vacuuming", "bid")]


def test_vacuuming_with_most_of_the_depth_on_one_level():
    """Two orders of 50 at the touch and 30 on two levels behind it: no single order
    dominates, so this is the side's depth being pulled."""
    eng, t = warm_engine()
    evs = uneven_vacuum_events(t, [100.0, 30.0, 30.0],
                               [(0, 10000, 50.0), (100, 9999, 30.0), (200, 10000, 50.0), (300, 9998, 30.0)])
    assert [(e.scheme, e.side) for e in run(eng, evs)] == [("vacuuming", "bid")]


def test_layers_worn_down_by_small_cancels_are_not_layering():
    """Four large asks that each lose their size in slices of 20 (no single cancel takes
    half of one) were not pulled: a busy book's cancels wearing them down."""
    eng, t = warm_engine()
    evs = [e for e in layering_events(t) if not (isinstance(e, BookDelta) and e.ts_ms >= t + 7000)]
    for i, tk in enumerate([10004, 10005, 10006, 10007]):
        evs += [BookDelta(t + 7000 + 100 * i + 20 * k, asks=((px(tk), 90.0 - 20.0 * k),)) for k in range(5)]
    evs.sort(key=lambda e: e.ts_ms)
    assert [e for e in run(eng, evs) if e.scheme == "layering"] == []


def test_layers_taken_away_before_they_stood_together_for_a_second_are_not_layering(monkeypatch):
    """Four large asks added within 600 ms and pulled 500 ms after the last came: the ladder
    was never in view as a whole long enough to mislead anyone (a market maker's ladder
    placed and taken back). Without the rule the same events are layering."""
    def found():
        eng, t = warm_engine()
        evs = [e for e in layering_events(t) if not (isinstance(e, BookDelta) and e.ts_ms >= t + 7000)]
        levels = [10004, 10005, 10006, 10007]
        evs += [BookDelta(t + 2100 + 100 * i, asks=((px(tk), 10.0),)) for i, tk in enumerate(levels)]
        evs.sort(key=lambda e: e.ts_ms)
        return [(e.scheme, e.side) for e in run(eng, evs) if e.scheme == "layering"]

    assert found() == []
    monkeypatch.setattr(layering, "LAYER_MIN_STOOD_MS", 0)
    assert found() == [("layering", "ask")]


def test_layers_pulled_in_two_groups_700_ms_apart_are_one_cluster():
    """Two of the four layers pulled, then (700 ms later, longer than the quiet that closes a
    collapse) the other two: one cluster of DETECTION.md's second, so one layering event of
    four layers, not two collapses of two layers each that are none."""
    eng, t = warm_engine()
    evs = [e for e in layering_events(t) if not (isinstance(e, BookDelta) and e.ts_ms >= t + 7000)][:-1]
    evs += [BookDelta(t + ms, asks=((px(tk), 10.0),))
            for ms, tk in ((7000, 10004), (7100, 10005), (7800, 10006), (7900, 10007))]
    evs += [Trade(t + 8500, px(10002), 1.0, "buy"), Trade(t + 9000, px(10002), 1.0, "buy")]
    found = [e for e in run(eng, evs) if e.scheme == "layering"]
    assert [(e.side, e.build["levels"]) for e in found] == [("ask", 4)]


def test_layers_whose_cluster_took_most_of_them_are_layering_once_the_rest_is_cancelled():
    """The cluster cancels 60 % of each layer (most, short of DETECTION.md's 70 %); the rest
    goes 12 s later, inside the 60 s: layering, emitted once 70 % of the layers was cancelled. Without
    the rest it is none."""
    def layering_found(with_rest):
        eng, t = warm_engine()
        evs = [e for e in layering_events(t) if not (isinstance(e, BookDelta) and e.ts_ms >= t + 7000)][:-1]
        levels = [10004, 10005, 10006, 10007]
        evs += [BookDelta(t + 7000 + 100 * i, asks=((px(tk), 50.0),)) for i, tk in enumerate(levels)]
        if with_rest:
            evs += [BookDelta(t + 20000 + 100 * i, asks=((px(tk), 10.0),)) for i, tk in enumerate(levels)]
        evs += [Trade(t + ms, px(10002), 1.0, "buy") for ms in (8500, 15000, 25000)]
        return t, [e for e in run(eng, evs) if e.scheme == "layering"]

    t, found = layering_found(True)
    assert [(e.side, e.build["levels"]) for e in found] == [("ask", 4)]
    assert found[0].ts_ms == t + 20000  # the first of the rest makes 70 %
    assert found[0].collapse["start_ms"] == t + 7000
    assert layering_found(False)[1] == []


def test_layers_pulled_with_bids_placed_alongside_them_are_a_two_sided_withdrawal():
    """Two large bids placed while the ask layers were built and pulled with them: the book
    was withdrawn on both sides, not layered on one."""
    eng, t = warm_engine()
    evs = layering_events(t, "ask")
    evs += [BookDelta(t + 1100, bids=((px(9998), 110.0),)), BookDelta(t + 1300, bids=((px(9997), 110.0),)),
            BookDelta(t + 7050, bids=((px(9998), 10.0),)), BookDelta(t + 7150, bids=((px(9997), 10.0),))]
    evs.sort(key=lambda e: e.ts_ms)
    assert [e for e in run(eng, evs) if e.scheme == "layering"] == []


def test_bids_that_stood_long_before_the_layers_do_not_make_their_pull_two_sided():
    """Two large bids placed 5 s before the ask layers were built and cancelled in the same
    second as the layers: the bids were no part of the layers' build (another trader's
    orders, or the book's own flow), so the layers' pull is layering."""
    eng, t = warm_engine()
    evs = [snapshot(t)] + [e for e in layering_events(t + 5000, "ask") if not isinstance(e, BookSnapshot)]
    evs += [BookDelta(t + 500, bids=((px(9998), 110.0),)), BookDelta(t + 700, bids=((px(9997), 110.0),)),
            BookDelta(t + 12050, bids=((px(9998), 10.0),)), BookDelta(t + 12150, bids=((px(9997), 10.0),))]
    evs.sort(key=lambda e: e.ts_ms)
    assert [(e.scheme, e.side) for e in run(eng, evs) if e.scheme == "layering"] == [("layering", "ask")]


def test_layers_moved_to_follow_the_touch_are_not_a_collapse():
    eng, t = warm_engine()
    evs = layering_events(t, "ask")[:5]  # four large asks 2..5 ticks behind the touch
    # each update takes one layer away and puts the same quantity back on another ask level:
    # re-priced (a peg following the touch), not withdrawn
    for i, (old, new) in enumerate([(10004, 10008), (10005, 10009), (10006, 10010), (10007, 10011)]):
        evs.append(BookDelta(t + 7000 + 100 * i, asks=((px(old), 10.0), (px(new), 110.0))))
    evs.append(Trade(t + 8500, px(10002), 1.0, "buy"))
    assert run(eng, evs) == []


def layer_shaped_vacuum_events(t, move_into_gap):
    """Four large bids 1..4 ticks behind the touch (layering's shape), pulled together."""
    evs = [snapshot(t)]
    for i, tk in enumerate([9999, 9998, 9997, 9996]):
        evs.append(BookDelta(t + 1000 + 200 * i, bids=((px(tk), 110.0),)))
    for i, tk in enumerate([9999, 9998, 9997, 9996]):
        evs.append(BookDelta(t + 6000 + 100 * i, bids=((px(tk), 10.0),)))
    if move_into_gap:  # sellers take the touch and the next levels at once
        evs.append(Trade(t + 6450, px(10000), 10.0, "sell"))
        evs.append(Trade(t + 6450, px(9999), 10.0, "sell"))
        evs.append(BookDelta(t + 6450, bids=((px(10000), 0.0), (px(9999), 0.0))))
    evs.append(Trade(t + 7500, px(10002), 1.0, "buy"))
    return evs


def test_a_pull_shaped_like_layers_is_vacuuming_when_price_moves_into_the_gap_at_once():
    eng, t = warm_engine()
    out = run(eng, layer_shaped_vacuum_events(t, move_into_gap=True))
    assert [(e.scheme, e.side, e.direction) for e in out] == [("vacuuming", "bid", "down")]


def test_a_pull_shaped_like_layers_without_a_move_is_left_to_layering():
    eng, t = warm_engine()
    out = run(eng, layer_shaped_vacuum_events(t, move_into_gap=False))
    assert [(e.scheme, e.side, e.direction) for e in out] == [("layering", "bid", "up")]


def test_two_sided_pull_is_not_flagged():
    eng, t = warm_engine()
    assert run(eng, vacuum_events(t, two_sided=True)) == []


def test_the_other_sides_re_quotes_do_not_make_a_pull_two_sided(monkeypatch):
    """The asks lose 24 a second to cancels all the time and get it back 100 ms later (a
    market maker re-quoting); doing so while the bids are pulled does not make the pull
    two-sided: the asks stay. Counted without what was put back (as for an elevated side),
    those same cancels would."""
    def found(other_elevated):
        monkeypatch.setattr(vacuuming, "VAC_OTHER_ELEVATED", other_elevated)
        eng, t = warm_engine(ask_churn=6.0)
        evs = sorted(vacuum_events(t) + ask_churn_events(t, t + 8000, 6.0), key=lambda e: e.ts_ms)
        return [(e.scheme, e.side) for e in run(eng, evs)]

    assert found(vacuuming.VAC_OTHER_ELEVATED) == [("vacuuming", "bid")]
    assert found(0.0) == []


def requoted_vacuum_events(t, move_at):
    """The raised bids are moved a level down 1 s before they go, so what the pull takes was
    placed a moment before; price moves into the gap at move_at."""
    evs = [e for e in vacuum_events(t) if e.ts_ms < t + 6000]
    moved = [10000, 9999, 9998, 9997]
    evs.append(BookDelta(t + 5000, bids=tuple((px(tk), 10.0) for tk in moved)
                         + tuple((px(tk - 4), 60.0) for tk in moved)))
    for i, tk in enumerate(moved):
        evs.append(BookDelta(t + 6000 + 100 * i, bids=((px(tk - 4), 10.0),)))
    evs.append(BookDelta(move_at, bids=((px(10000), 0.0), (px(9999), 0.0))))
    return evs


def test_a_pull_of_quotes_placed_a_moment_ago_needs_price_to_move_into_the_gap_at_once():
    """Quotes placed a moment ago and withdrawn are a ladder re-quoted as often as depth
    pegged to the touch (real re-quotes: 0-11 % of a pull had rested; see
    docs/DETECTION_METHOD.md): vacuuming only if price moves into the gap within 1 s, where
    depth that rested has 5 s."""
    def found(evs):
        eng, t = warm_engine()
        return [(e.scheme, e.side) for e in run(eng, evs(t)) if e.scheme == "vacuuming"]

    assert found(lambda t: requoted_vacuum_events(t, move_at=t + 6700)) == [("vacuuming", "bid")]
    assert found(lambda t: requoted_vacuum_events(t, move_at=t + 8500)) == []
    rested_late_move = lambda t: [e for e in vacuum_events(t) if e.ts_ms < t + 6700] + [
        BookDelta(t + 8500, bids=((px(10000), 0.0), (px(9999), 0.0)))]
    assert found(rested_late_move) == [("vacuuming", "bid")]


def test_an_elevated_other_side_cancelling_makes_a_pull_two_sided_whatever_it_puts_back(monkeypatch):
    """The asks re-quote 24 a second, which alone is no withdrawal (the test above). Asks
    raised to over twice their usual depth and cut back while the bids are pulled are
    withdrawn too, whatever is placed there meanwhile: a two-sided pull. Counted net of
    what was put back, the same cut would pass."""
    def found(other_elevated):
        monkeypatch.setattr(vacuuming, "VAC_OTHER_ELEVATED", other_elevated)
        eng, t = warm_engine(ask_churn=6.0)
        evs = vacuum_events(t)
        evs += [BookDelta(t + 1000 + 300 * i, asks=((px(10003 + i), 50.0),)) for i in range(3)]
        evs += [BookDelta(t + 6000 + 100 * i, asks=((px(10003 + i), 42.0),)) for i in range(3)]
        evs = sorted(evs + ask_churn_events(t, t + 8000, 6.0), key=lambda e: e.ts_ms)
        return [(e.scheme, e.side) for e in run(eng, evs) if e.scheme == "vacuuming"]

    assert found(vacuuming.VAC_OTHER_ELEVATED) == []
    assert found(float("inf")) == [("vacuuming", "bid")]


def test_bids_pulled_while_the_asks_stand_deeper_still_are_not_vacuuming(monkeypatch):
    """The bids are raised to three times their usual top-10 depth and pulled, but the asks
    stand at six times theirs all along (and stay): the book was deep on both sides, the
    asks more so, so the bids never showed one-sided depth. With the rule off the same
    events are vacuuming."""
    def found():
        eng, t = warm_engine()
        evs = vacuum_events(t)
        evs += [BookDelta(t + 500 + 100 * i, asks=((px(10003 + i), 110.0),)) for i in range(5)]
        evs.sort(key=lambda e: e.ts_ms)
        return [(e.scheme, e.side) for e in run(eng, evs) if e.scheme == "vacuuming"]

    assert found() == []
    monkeypatch.setattr(vacuuming, "VAC_OTHER_DEEPER", float("inf"))
    assert found() == [("vacuuming", "bid")]


def ask_pulled_beside_a_heavy_best_bid(t):
    """A book whose best bid is heavy (100, market makers' quotes; levels of 10 behind it)
    and a large ask (130) one tick behind the touch, pulled 2 s later."""
    bids, asks = book(touch_q=100.0)
    return [BookSnapshot(t, bids, asks),
            BookDelta(t + 1000, asks=((px(10003), 130.0),)),
            BookDelta(t + 3000, asks=((px(10003), 10.0),))]


def test_the_queues_own_cancels_do_not_withdraw_a_mirror_that_joined_it():
    """The mirror (80) joins a best bid of 100; the queue ahead of it cancels 48 in slices of
    8 while it rests. Those are the queue's cancels, not the mirror's: it rested."""
    eng, t = warm_engine(touch_q=100.0)
    evs = ask_pulled_beside_a_heavy_best_bid(t) + [BookDelta(t + 3050, bids=((px(10000), 180.0),))]
    evs += [BookDelta(t + 3100 + 50 * k, bids=((px(10000), 180.0 - 8.0 * (k + 1)),)) for k in range(6)]
    evs += [later_update(t + 3600)]
    out = run(eng, evs)
    assert [(e.scheme, e.side, e.collapse["flip_mode"]) for e in out] == [("flipping", "ask", "mirror")]


def test_another_orders_cancel_at_the_mirrors_level_does_not_withdraw_the_mirror(monkeypatch):
    """The mirror (80) joins a best bid of 100 and one order of the queue (60) is cancelled
    while it rests. A cancel that takes less than all the mirror has left is not its own: a
    flipped order is withdrawn whole. Read as the mirror's (60 of its 80), it would have
    been withdrawn before it rested."""
    def found():
        eng, t = warm_engine(touch_q=100.0)
        evs = ask_pulled_beside_a_heavy_best_bid(t) + [
            BookDelta(t + 3050, bids=((px(10000), 180.0),)),
            BookDelta(t + 3200, bids=((px(10000), 120.0),)),
            later_update(t + 3600)]
        return [(e.scheme, e.side, e.collapse["flip_mode"]) for e in run(eng, evs)]

    assert found() == [("flipping", "ask", "mirror")]
    monkeypatch.setattr(flipping, "MIRROR_WHOLE_CANCEL", 0.3)
    assert found() == []


def test_wall_filled_by_trades_is_not_flagged():
    eng, t = warm_engine()
    evs = [snapshot(t), BookDelta(t + 1000, bids=((px(10000), 130.0),))]
    for i in range(4):  # eaten by sells
        ts = t + 3000 + 500 * i
        evs.append(Trade(ts, px(10000), 30.0, "sell"))
        evs.append(BookDelta(ts, bids=((px(10000), 130.0 - 30.0 * (i + 1)),)))
    evs.append(Trade(t + 5500, px(9999), 10.0, "sell"))
    assert run(eng, evs) == []


def test_quote_refresh_is_not_flagged():
    eng, t = warm_engine()
    evs = [snapshot(t), BookDelta(t + 1000, asks=((px(10002), 60.0),))]
    for i in range(6):
        ts = t + 2000 + 500 * i
        evs.append(BookDelta(ts, asks=((px(10002), 10.0),)))
        evs.append(BookDelta(ts + 20, asks=((px(10002), 60.0),)))
        evs.append(Trade(ts + 30, px(10001), 5.0, "buy"))
    assert run(eng, evs) == []


def test_level_scrolling_out_of_view_is_not_a_cancel():
    eng, t = warm_engine()
    evs = [snapshot(t), BookDelta(t + 1000, bids=((px(9971), 200.0), (px(9972), 200.0)))]
    # the deepest levels leave the truncated view one after another
    evs.append(BookDelta(t + 5000, bids=((px(9971), 0.0),)))
    evs.append(BookDelta(t + 5001, bids=((px(9972), 0.0),)))
    assert run(eng, evs) == []
    tr = eng.tracker
    ch = tr.on_delta(BookDelta(t + 6000, bids=((px(9973), 0.0),)))
    assert ch[0].scrolled and ch[0].cancelled == 10.0


def test_minute_snapshot_is_a_reset_not_cancels():
    eng, t = warm_engine()
    evs = [snapshot(t)]
    for i, tk in enumerate([10004, 10005, 10006]):
        evs.append(BookDelta(t + 50_000 + 100 * i, asks=((px(tk), 110.0),)))
    # the next minute's snapshot no longer has them: a resync, not a pull
    evs.append(snapshot(t + 60_000))
    evs.append(BookDelta(t + 60_500, asks=((px(10010), 11.0),)))
    assert run(eng, evs) == []


def test_executed_and_cancelled_split():
    eng, t = warm_engine(1)
    eng.feed(Trade(t, px(10000), 4.0, "sell"))
    ch = eng.tracker.on_delta(BookDelta(t, bids=((px(10000), 1.0),)))
    assert ch[0].executed == 4.0 and ch[0].cancelled == 5.0


def test_deterministic_and_restorable():
    evs = layering_events(T0 + 180_000) + vacuum_events(T0 + 240_000)
    a, _ = warm_engine()
    b, _ = warm_engine()
    out_a = [e.to_dict() for e in a.feed_many(evs)]
    out_b = [e.to_dict() for e in b.feed_many(evs)]
    assert out_a == out_b and out_a
    # restart half-way from a stored state: same events, none repeated
    c, _ = warm_engine()
    half = len(evs) // 2
    first = [e.to_dict() for e in c.feed_many(evs[:half])]
    c2 = DetectorEngine.restore(c.state())
    rest = [e.to_dict() for e in c2.feed_many(evs[half:])]
    assert first + rest == out_a
    # a state written by another version of the engine is refused, not restored half-filled
    version, engine = pickle.loads(c.state())
    assert version == DetectorEngine.STATE_VERSION and isinstance(engine, DetectorEngine)
    with pytest.raises(TypeError):
        DetectorEngine.restore(pickle.dumps((version - 1, engine)))
    with pytest.raises(TypeError):
        DetectorEngine.restore(pickle.dumps(engine))
    assert all(isinstance(x, SchemeEvent) for x in b.feed_many([]))


def test_one_large_cancel_among_small_ones_is_not_vacuuming():
    """Elevated bids shed mostly in one large cancel (a big order pulled) are not a side's
    depth being pulled, even though the rest went on three other levels."""
    eng, t = warm_engine()
    tks, extra = [10000, 9999, 9998, 9997], [150.0, 40.0, 40.0, 40.0]
    evs = [snapshot(t)]
    for i in range(4):
        evs.append(BookDelta(t + 1000 + 300 * i, bids=((px(tks[i]), 10.0 + extra[i]),)))
    for i in range(4):
        evs.append(BookDelta(t + 6000 + 100 * i, bids=((px(tks[i]), 10.0),)))
    evs.append(BookDelta(t + 6700, bids=((px(10000), 0.0), (px(9999), 0.0))))
    assert [e for e in run(eng, evs) if e.scheme == "vacuuming"] == []


def test_on_a_netted_feed_a_pull_three_levels_carry_may_take_half_on_one_of_them():
    """A batch nets every order pulled at a price in its 100 ms, so 70 of 150 pulled at the
    touch may be several orders: on three levels that carry the pull, one may take half.
    Per event each cancel is an order, and 47 % in one is one order pulled."""
    def found(batch_ms, extra):
        eng, t = warm_engine(batch_ms=batch_ms)
        pulls = [(100 * i, 10000 - i, q) for i, q in enumerate(extra)]
        return [(e.scheme, e.side) for e in run(eng, uneven_vacuum_events(t, extra, pulls)) if e.scheme == "vacuuming"]

    assert found(100, [70.0, 40.0, 40.0]) == [("vacuuming", "bid")]
    assert found(0, [70.0, 40.0, 40.0]) == []
    assert found(100, [150.0, 40.0, 40.0, 40.0]) == [], "one large cancel among small ones is still one order"


# -- netted depth feeds -----------------------------------------------------------------------

def test_on_a_netted_feed_a_fill_is_matched_with_the_decrease_of_the_next_batch():
    from schemes.detectors.book import BookTracker

    for batch_ms, executed in ((100, 0.4), (0, 0.0)):
        tracker = BookTracker(tick_size=0.01, batch_ms=batch_ms)
        tracker.on_snapshot(BookSnapshot(1_000, ((100.0, 1.0),), ((100.01, 1.0),)))
        tracker.on_trade(Trade(1_030, 100.0, 0.4, "sell", "1"))  # hits the bid
        tracker.on_trade(Trade(1_040, 100.01, 0.2, "buy", "2"))  # hits the ask, which grows anyway
        (bid, ask) = tracker.on_delta(BookDelta(1_100, ((100.0, 0.5),), ((100.01, 1.3),)))
        assert (bid.executed, bid.cancelled) == pytest.approx((executed, 0.5 - executed))
        assert ask.executed == 0.0  # an increase is an add, whatever traded


def test_on_real_recorded_traffic_most_traded_volume_is_recognised_as_fills():
    from pathlib import Path

    from market.sources.venues import binance_recording_events

    path = Path(__file__).resolve().parents[2] / "data/realdata/binance-spot/ethusdt_20240808.gz"
    events = sorted(binance_recording_events(path, "ETHUSDT"), key=lambda e: e.ts_ms)
    traded = sum(e.qty for e in events if type(e) is Trade)
    shares = {}
    for batch_ms in (0, 100):
        engine = DetectorEngine(PairRef("binance", "ETH", "USDT"), batch_ms=batch_ms)
        executed = 0.0
        for event in events:
            if type(event).__name__ == "BookDelta":
                before = engine.tracker.on_delta
                changes = before(event)
                executed += sum(c.executed for c in changes)
                engine.tracker.on_delta = lambda d, changes=changes: changes  # the engine reuses what we computed
                engine.feed(event)
                engine.tracker.on_delta = before
            else:
                engine.feed(event)
        shares[batch_ms] = executed / traded
    assert shares[0] < 0.01 and shares[100] > 0.8  # measured 0.0 % and 82.5 %


def test_a_vacuuming_build_counts_only_what_was_added_to_the_ten_best_levels():
    eng, t = warm_engine()
    evs = vacuum_events(t)
    # a big order far behind the touch while the depth builds: not part of the vacuum
    evs.insert(2, BookDelta(t + 1100, bids=((px(9950), 5000.0),)))
    out = run(eng, evs)
    assert [(e.scheme, e.side) for e in out] == [("vacuuming", "bid")]
    build, collapse = out[0].build, out[0].collapse
    assert build["added_qty"] == pytest.approx(4 * 50.0)  # the four best levels raised from 10 to 60
    assert build["levels"] == 4 and build["distance_ticks_max"] <= 3
    assert collapse["cancelled_qty"] == pytest.approx(collapse["cancelled_qty_top10"])


def test_depth_that_came_into_view_as_price_fell_is_not_a_build(monkeypatch):
    """Large bids resting out of view (12th-15th level) come into the ten best levels as
    the six levels in front are cancelled one by one, so the side's top-10 depth triples
    while nobody adds to it; they are then cut back and price falls into the gap. That
    depth was never built: the build must have grown the ten best levels by most of the
    peak's excess (VAC_MIN_BUILT). Without that rule the same events are vacuuming."""
    def found(min_built):
        monkeypatch.setattr(vacuuming, "VAC_MIN_BUILT", min_built)
        eng, t = warm_engine()
        bids, asks = book()
        deep = {10000 - i for i in range(12, 16)}
        bids = tuple((p, 60.0 if round(p / TICK) in deep else q) for p, q in bids)
        evs = [BookSnapshot(t, bids, asks)]
        evs += [BookDelta(t + 1000 + 300 * i, bids=((px(10000 - i), 0.0),)) for i in range(6)]
        evs += [BookDelta(t + 6000 + 100 * i, bids=((px(tk), 10.0),)) for i, tk in enumerate(sorted(deep))]
        evs.append(BookDelta(t + 6700, bids=((px(9994), 0.0), (px(9993), 0.0))))
        return [(e.scheme, e.side) for e in run(eng, evs) if e.scheme == "vacuuming"]

    assert found(vacuuming.VAC_MIN_BUILT) == []
    monkeypatch.setattr(vacuuming, "VAC_MAX_PULLED_OF_BUILT", float("inf"))  # nor what the pull took of it
    assert found(0.0) == [("vacuuming", "bid")]


def test_depth_pulled_less_than_two_seconds_after_it_rose_is_not_vacuuming():
    """The rest is measured until the pull begins: the pull's own time does not count."""
    eng, t = warm_engine()
    evs = [snapshot(t)]
    for i in range(4):
        evs.append(BookDelta(t + 1000 + 100 * i, bids=((px(10000 - i), 60.0),)))
    for i in range(4):  # the pull begins 1.2 s after the depth rose and ends 1.5 s after it
        evs.append(BookDelta(t + 2200 + 100 * i, bids=((px(10000 - i), 10.0),)))
    evs.append(BookDelta(t + 2900, bids=((px(10000), 0.0), (px(9999), 0.0))))
    assert run(eng, evs) == []


def test_depth_the_side_often_shows_is_not_unusually_large():
    """A side whose top-10 depth swings to twice its median one second in three: raising it
    to 1.6 x and pulling it is that side's ordinary flow."""
    eng = DetectorEngine(PAIR, tick_size=TICK, distance_scale=1.0)
    evs = []
    for m in range(3):
        t0 = T0 + m * 60_000
        bids, asks = book()
        evs.append(BookSnapshot(t0, bids, asks))
        for s in range(60):
            ts = t0 + s * 1000 + 500
            evs.append(Trade(ts, px(10002), 1.0, "buy"))
            level = 40.0 if s % 3 == 0 else 10.0  # a market maker's size on the three best bids
            evs.append(BookDelta(ts, bids=tuple((px(10000 - i), level) for i in range(3))))
    eng.feed_many(evs)
    t = T0 + 3 * 60_000
    assert eng.base.unusual_depth10["bid"] >= 1.9 * eng.base.med_depth10["bid"]
    raised = [snapshot(t)] + [BookDelta(t + 1000 + 300 * i, bids=((px(10000 - i), 26.0),)) for i in range(4)]
    pulled = [BookDelta(t + 6000 + 100 * i, bids=((px(10000 - i), 10.0),)) for i in range(4)]
    assert run(eng, raised + pulled + [BookDelta(t + 6700, bids=((px(10000), 0.0), (px(9999), 0.0)))]) == []


def test_an_order_as_large_as_the_usual_touch_is_not_large_at_the_touch():
    """On real books the best level holds the queue (tens of times the levels behind it):
    an order is large at the touch against the touch's usual size."""
    eng = DetectorEngine(PAIR, tick_size=TICK, distance_scale=1.0)
    evs = []
    for m in range(3):
        t0 = T0 + m * 60_000
        bids = ((px(10000), 200.0),) + tuple((px(10000 - i), 2.0) for i in range(1, 30))
        asks = ((px(10002), 200.0),) + tuple((px(10002 + i), 2.0) for i in range(1, 30))
        evs.append(BookSnapshot(t0, bids, asks))
        for s in range(60):
            evs.append(Trade(t0 + s * 1000 + 500, px(10002), 1.0, "buy"))
            evs.append(BookDelta(t0 + s * 1000 + 500, asks=((px(10002), 199.0),)))
            evs.append(BookDelta(t0 + s * 1000 + 600, asks=((px(10002), 200.0),)))
    eng.feed_many(evs)
    assert eng.large_threshold("ask", 0.0) >= 3 * 200.0 * 0.9
    assert eng.large_threshold("ask", 3.0) < 50.0


def test_on_a_netted_feed_a_pull_whose_flip_swept_the_levels_in_front_is_flipping():
    """A bid of 100 one tick behind the touch is pulled, and within the same 100 ms batch
    one sell order takes the touch, the rest of the order's level and the three levels
    behind it. The batch shows the order's level emptied with the touch gone, which is
    what price running through a stale quote looks like; but one taker order printed both
    in front of the price and past it without taking the 100, so it had been pulled first."""
    eng, t = warm_engine(batch_ms=100)
    swept = (10000, 9999, 9998, 9997, 9996)
    evs = [snapshot(t), BookDelta(t + 1000, bids=((px(9999), 110.0),))]
    evs += [Trade(t + 4030, px(tk), 10.0, "sell") for tk in swept]
    evs += [BookDelta(t + 4100, bids=tuple((px(tk), 0.0) for tk in swept))]
    out = run(eng, evs)
    assert [(e.scheme, e.side, e.direction) for e in out] == [("flipping", "bid", "up")]


def test_on_a_netted_feed_prints_of_part_of_the_levels_in_front_are_price_running_over_them():
    """The batch of the test above, but the millisecond's print in front of the bid takes 3
    of the 10 that stood there: no taker order fills part of a level and moves on, so these
    are stale quotes settled as price jumped over them (mostly cancelled, partly traded),
    and the 100 going with them says nothing of a pull before price came: no flip."""
    eng, t = warm_engine(batch_ms=100)
    swept = (10000, 9999, 9998, 9997, 9996)
    evs = [snapshot(t), BookDelta(t + 1000, bids=((px(9999), 110.0),))]
    evs += [Trade(t + 4030, px(10000), 3.0, "sell")] + [Trade(t + 4030, px(tk), 10.0, "sell") for tk in swept[2:]]
    evs += [BookDelta(t + 4100, bids=tuple((px(tk), 0.0) for tk in swept))]
    assert run(eng, evs) == []


def test_a_mirror_smaller_than_the_usual_best_level_still_flips_a_large_order():
    """Where market makers' quotes make the best level heavy (100 against levels of 10
    behind it), an ask of 130 one tick behind the touch is large, and the 100 that rests on
    the bid side after its pull is its mirror: it matches the pulled order, though it is no
    larger than the usual best level it joins."""
    eng, t = warm_engine(touch_q=100.0)
    evs = ask_pulled_beside_a_heavy_best_bid(t) + [
        BookDelta(t + 3050, bids=((px(10001), 100.0),)), later_update(t + 3200), later_update(t + 3600)]
    out = run(eng, evs)
    assert [(e.scheme, e.side, e.collapse["flip_mode"]) for e in out] == [("flipping", "ask", "mirror")]


def test_a_vacuuming_pull_reports_what_had_rested_and_nothing_put_back():
    """The pulled bids were built seconds before and nothing replaced them while they
    went: the event says so (a ladder moved by a market maker puts back what it cancels,
    and a pull of quotes placed moments before is no depth that rested)."""
    eng, t = warm_engine()
    [event] = run(eng, vacuum_events(t))
    assert event.collapse["readded_qty"] == 0.0
    assert event.collapse["rested_qty"] == pytest.approx(event.collapse["cancelled_qty"])


def test_a_large_cancel_is_the_orders_own_and_small_ones_its_share_of_the_level():
    assert cancel_attributed(30.0, 80.0, 180.0) == 30.0  # >= 30 % of what is left of it
    assert cancel_attributed(8.0, 80.0, 160.0) == pytest.approx(4.0)  # a small one: its half of the level
    assert cancel_attributed(100.0, 80.0, 180.0) == 80.0  # never more than it has left
    assert cancel_attributed(8.0, 0.0, 160.0) == 0.0


def test_a_vacuuming_pull_ends_when_nearly_all_it_cancelled_is_gone():
    """A straggler's small cancel after the pull does not stretch it: the book refilling
    the gap meanwhile would otherwise be judged as the pulled depth put back (measured:
    docs/DETECTION_METHOD.md, "The end of a pull")."""
    flow = [(100, 50.0, 0.0, 1.0), (200, 50.0, 0.0, 2.0), (250, 0.0, 3.0, 2.0), (300, 50.0, 0.0, 3.0),
            (900, 4.0, 0.0, 9.0)]
    assert vacuuming._pull_span(flow, 0) == (4, 100, 300)
    assert vacuuming._pull_span(flow, 150) == (3, 200, 300)
    assert vacuuming._pull_span(flow, 250) == (2, 300, 900)  # from 300 on, 4 is more than a twentieth
    assert vacuuming._pull_span(flow, 1000) == (0, None, None)


def test_a_pull_that_takes_the_sides_standing_depth_with_the_build_is_not_vacuuming(monkeypatch):
    """Bids raised by 35 on three levels (105 placed), then those and the 10 standing on
    each of the next seven levels cancelled: the pull took 175, more than 1.25 x what was
    built, so the book withdrew, not a build pulled. The raised bids alone are vacuuming."""
    def found(standing_pulled):
        eng, t = warm_engine()
        evs = uneven_vacuum_events(t, [35.0, 35.0, 35.0], [(0, 10000, 35.0), (100, 9999, 35.0), (200, 9998, 35.0)])
        if standing_pulled:
            evs.append(BookDelta(t + 6050, bids=tuple((px(tk), 0.0) for tk in range(9997, 9990, -1))))
        evs.sort(key=lambda e: e.ts_ms)
        return [(e.scheme, e.side) for e in run(eng, evs) if e.scheme == "vacuuming"]

    assert found(standing_pulled=False) == [("vacuuming", "bid")]
    assert found(standing_pulled=True) == []
    monkeypatch.setattr(vacuuming, "VAC_MAX_PULLED_OF_BUILT", 10.0)
    assert found(standing_pulled=True) == [("vacuuming", "bid")]


def test_a_quote_re_priced_along_the_other_side_is_no_mirror(monkeypatch):
    """An ask of 110 is pulled and, 50 ms later, a bid block of 80 that rested five ticks
    down moves to the best bid in one update (its old level loses 80 as the new one gains
    80): depth that was on the bid already, re-priced, not an order flipped to it (the
    second market's makers re-quote this way; docs/DETECTION_METHOD.md, flipping)."""
    def found():
        eng, t = warm_engine()
        evs = [snapshot(t), BookDelta(t + 500, bids=((px(9996), 90.0),)),
               BookDelta(t + 1000, asks=((px(10003), 120.0),)), BookDelta(t + 3000, asks=((px(10003), 10.0),)),
               BookDelta(t + 3050, bids=((px(9996), 10.0), (px(10001), 80.0))), later_update(t + 3600)]
        return [(e.scheme, e.side) for e in run(eng, evs) if e.scheme == "flipping"]

    assert found() == []
    monkeypatch.setattr(flipping, "MIRROR_MOVED_SHARE", 10.0)
    assert found() == [("flipping", "ask")]



def test_a_far_order_pulled_with_the_mirror_does_not_make_it_a_move(monkeypatch):
    """An ask of 110 is pulled and, 50 ms later, a bid of 80 appears at the best bid while, in
    the same (netted) update, a bid of 100 resting 25 ticks down is cancelled. Beyond
    MIRROR_MOVED_MAX_DIST_SCALED (set to 20 here: the test book shows 30 levels) it is a
    patient far order, not the add's quote moving along the side, so the bid is new depth: a
    mirror; within it, a quote re-priced. The simulator's flipper's mirror met a patient far
    order's cancel this way on a netted feed (hundreds of scaled ticks down)."""
    def found():
        eng, t = warm_engine()
        evs = [snapshot(t), BookDelta(t + 500, bids=((px(9975), 100.0),)),
               BookDelta(t + 1000, asks=((px(10003), 120.0),)), BookDelta(t + 3000, asks=((px(10003), 10.0),)),
               BookDelta(t + 3050, bids=((px(9975), 10.0), (px(10001), 80.0))), later_update(t + 3600)]
        return [(e.scheme, e.side) for e in run(eng, evs) if e.scheme == "flipping"]

    monkeypatch.setattr(flipping, "MIRROR_MOVED_MAX_DIST_SCALED", 20.0)
    assert found() == [("flipping", "ask")]
    monkeypatch.setattr(flipping, "MIRROR_MOVED_MAX_DIST_SCALED", 1e9)
    assert found() == []

def layers_held(t, hold_ms, side="ask"):
    """Four large asks 2..5 ticks behind the touch, pulled together hold_ms after the last;
    the book's usual flow (a trade and its refill a second) goes on meanwhile."""
    levels = [10004, 10005, 10006, 10007]
    evs = [snapshot(t)] + [BookDelta(t + 1000 + 200 * i, asks=((px(tk), 110.0),)) for i, tk in enumerate(levels)]
    pull = t + 1600 + hold_ms
    for s in range(t + 2000, pull, 1000):
        evs += [Trade(s, px(10002), 1.0, "buy"), BookDelta(s, asks=((px(10002), 9.0),)),
                BookDelta(s + 100, asks=((px(10002), 10.0),))]
    evs += [BookDelta(pull + 100 * i, asks=((px(tk), 10.0),)) for i, tk in enumerate(levels)]
    evs.append(Trade(pull + 1500, px(10002), 1.0, "buy"))
    return evs


def test_layers_pulled_within_60_s_of_their_build_are_layering():
    """DETECTION.md's collapse comes within 60 s: layers held 55 s are followed until their
    pull (a large add is followed 65 s, RECORD_TTL_MS, longer than LAYER_MAX_HOLD_MS); held
    70 s they are patient orders, not layers."""
    eng, t = warm_engine()
    assert [(e.scheme, e.side) for e in run(eng, layers_held(t, 55_000)) if e.scheme == "layering"] == \
        [("layering", "ask")]
    eng, t = warm_engine()
    assert [e for e in run(eng, layers_held(t, 70_000)) if e.scheme == "layering"] == []
    assert engine.RECORD_TTL_MS > layering.LAYER_MAX_HOLD_MS



def moved_ladder_events(t, moved=True):
    """Four large asks 6..9 ticks behind the touch stand from the start; then one by one each
    steps 4 ticks nearer the touch (taken off its price in the update that places it: a market
    maker's ladder following the price) or, with moved=False, the nearer asks are placed as
    new orders beside them; after 5 s the nearer asks are pulled together."""
    evs = [snapshot(t), BookDelta(t + 100, asks=tuple((px(10008 + i), 110.0) for i in range(4)))]
    for i in range(4):
        levels = ((px(10004 + i), 110.0),) + (((px(10008 + i), 10.0),) if moved else ())
        evs.append(BookDelta(t + 1000 + 200 * i, asks=levels))
    for i in range(4):
        evs.append(BookDelta(t + 7000 + 100 * i, asks=((px(10004 + i), 10.0),)))
    evs.append(Trade(t + 8500, px(10002), 1.0, "buy"))
    return evs


def test_a_ladder_of_quotes_moved_along_its_side_and_then_pulled_is_not_layering():
    eng, t = warm_engine()
    assert [e.scheme for e in run(eng, moved_ladder_events(t, moved=False))] == ["layering"]
    eng, t = warm_engine()
    assert [e.scheme for e in run(eng, moved_ladder_events(t, moved=True))] == []
