"""SimulatorSource: deterministic events, labelled episodes, synthesized bars."""

import hashlib
import math
import random
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from market.bars import DAY_MS, HOUR_MS, MINUTE_MS, merge
from market.sources.bar_builder import BarBuilder, build_bars
from market.sources.events import BookDelta, BookSnapshot, PairRef, Quote, Trade
from market.sources.simulator import HARD_NEGATIVES, SCHEMES, Episode, SimulatorSource
from market.sources.simulator.block import _Block
from market.sources.simulator.informed import cross
from market.sources.flow_stats import flow_profile
from market.sources.netting import net_depth

pytestmark = pytest.mark.heavy

ROOT = Path(__file__).resolve().parents[2]
BTC = PairRef("binance", "BTC", "USDT")
ETH = PairRef("binance", "ETH", "USDT")
XRP = PairRef("binance", "XRP", "USDT")
T0 = 1_717_243_200_000  # 2024-06-01 12:00 UTC, a minute boundary
BOOK = (BookSnapshot, BookDelta)


def level_updates(events):
    return sum(len(e.bids) + len(e.asks) for e in events if type(e) in BOOK)


def digest(events):
    h = hashlib.sha256()
    for e in events:
        h.update(repr(e).encode())
    return h.hexdigest()


# -- determinism ---------------------------------------------------------------------------
@pytest.mark.parametrize("cut", [T0 + 1, T0 + 17_345, T0 + 60_000, T0 + 61_999, T0 + 119_999])
def test_a_window_equals_the_concatenation_of_any_split_of_it(cut):
    start, end = T0 - 12_500, T0 + 125_000
    whole = list(SimulatorSource(seed=5).events(BTC, start, end))
    fresh = SimulatorSource(seed=5)  # no shared cache with the first
    parts = list(fresh.events(BTC, start, cut)) + list(fresh.events(BTC, cut, end))
    assert parts == whole
    assert all(start <= e.ts_ms < end for e in whole)


def test_events_are_the_same_in_another_process():
    code = (
        "import hashlib, sys; sys.path.insert(0, %r)\n"
        "from market.sources.simulator import SimulatorSource\n"
        "from market.sources.events import PairRef\n"
        "h = hashlib.sha256()\n"
        "for e in SimulatorSource(seed=9, episodes_per_hour=30, hard_negatives=True).events("
        "PairRef('binance', 'ETH', 'USDT'), %d, %d): h.update(repr(e).encode())\n"
        "print(h.hexdigest())\n" % (str(ROOT), T0, T0 + 120_000)
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": "123", "PATH": "/usr/bin:/bin"}).stdout.strip()
    here = digest(SimulatorSource(seed=9, episodes_per_hour=30, hard_negatives=True).events(ETH, T0, T0 + 120_000))
    assert other == here


# The digest of a seed's stream, taken on the simulator as it stands: a refactor of the
# simulator must leave it bit-identical (the same random draws in the same order); only a
# deliberate change of the model may update it, and says so.
PINNED_STREAM = "f14b0d2e7577a8ef5491288772313dfb449c7213998043d29f7b7cc7132a4cd9"


def test_the_event_stream_of_a_seed_is_pinned():
    sim = SimulatorSource(seed=9, episodes_per_hour=30, hard_negatives=True)
    kinds = {e.kind for e in sim.episodes_between(ETH, T0, T0 + 10 * MINUTE_MS)}
    assert {"layering", "flipping", "vacuuming", "filled_wall", "patient_far"} <= kinds, "the minutes play episodes"
    assert digest(sim.events(ETH, T0, T0 + 10 * MINUTE_MS)) == PINNED_STREAM


def test_different_seeds_give_different_markets():
    a = list(SimulatorSource(seed=1).events(BTC, T0, T0 + 30_000))
    b = list(SimulatorSource(seed=2).events(BTC, T0, T0 + 30_000))
    assert a != b
    assert SimulatorSource(seed=1).mid_price(BTC, T0) != SimulatorSource(seed=2).mid_price(BTC, T0)


def test_earliest_is_unbounded():
    assert SimulatorSource().earliest_ms(BTC) is None
    assert SimulatorSource().name == "simulator"


# -- the market it produces ------------------------------------------------------------------
@pytest.fixture(scope="module")
def btc_ten_minutes():
    return list(SimulatorSource(seed=3).events(BTC, T0, T0 + 10 * MINUTE_MS))


def test_each_minute_starts_with_a_snapshot_and_events_are_time_ordered(btc_ten_minutes):
    events = btc_ten_minutes
    assert all(a.ts_ms <= b.ts_ms for a, b in zip(events, events[1:]))
    snapshots = [e for e in events if type(e) is BookSnapshot]
    assert [s.ts_ms for s in snapshots] == [T0 + i * MINUTE_MS for i in range(10)]
    for s in snapshots:
        assert 20 <= len(s.bids) <= 60 and 20 <= len(s.asks) <= 60
        assert list(s.bids) == sorted(s.bids, reverse=True) and list(s.asks) == sorted(s.asks)


def test_rates_are_those_of_the_real_recordings_for_btc_and_smaller_for_a_smaller_pair(btc_ten_minutes):
    """Of the order of the recorded Binance BTCUSDT flow: 28 trades and 359 level updates a second, netted
    into 100 ms messages of 16 levels (p50), 75 % of them of 10 levels or more."""
    netted = flow_profile(net_depth(btc_ten_minutes, 100))
    assert 180 <= netted["level_updates_per_s"] <= 600
    assert 10 <= netted["trades_per_s"] <= 45  # activity follows the hour of the day
    assert 8 <= netted["levels_per_message_p50"] <= 40
    assert netted["messages_with_10_levels_share"] >= 0.5
    xrp = list(SimulatorSource(seed=3).events(XRP, T0, T0 + 10 * MINUTE_MS))
    assert level_updates(xrp) < level_updates(btc_ten_minutes)
    assert sum(type(e) is Trade for e in xrp) < sum(type(e) is Trade for e in btc_ten_minutes)


def test_the_book_is_never_crossed_and_quotes_are_its_top(btc_ten_minutes):
    b = BarBuilder(BTC)
    quotes = 0
    for e in btc_ten_minutes:
        b.feed(e)
        bid, ask = b.best_bid(), b.best_ask()
        assert bid is None or ask is None or bid < ask
        if type(e) is Quote:
            quotes += 1
            bids, asks = b.book()
            assert (e.bid_price, e.bid_qty, e.ask_price, e.ask_qty) == (bids[0][0], bids[0][1], asks[0][0], asks[0][1])
    assert quotes > 1000


def test_market_orders_walk_the_book_and_carry_the_taker_side(btc_ten_minutes):
    b = BarBuilder(BTC)
    pending = []
    for e in btc_ten_minutes:
        if type(e) is Trade:
            bids, asks = b.book()
            side = dict(asks) if e.side == "buy" else dict(bids)
            assert e.price in side, "a trade executes at a resting level"
            assert e.qty <= side[e.price] + 1e-9
            pending.append(e)
        elif type(e) is BookDelta and pending:
            changed = dict(e.asks) | dict(e.bids)
            assert all(t.price in changed for t in pending), "the traded levels shrink in the next delta"
            pending = []
        b.feed(e)
    assert {e.side for e in btc_ten_minutes if type(e) is Trade} == {"buy", "sell"}


def test_prices_sit_on_the_tick_grid_and_base_prices_are_realistic():
    sim = SimulatorSource(seed=0)
    for pair, tick, lo, hi in ((BTC, 0.01, 10_000, 200_000), (ETH, 0.01, 500, 10_000),
                               (PairRef("binance", "SOL", "USDT"), 0.001, 20, 500),
                               (XRP, 0.0001, 0.1, 3.0), (PairRef("binance", "DOGE", "USDT"), 0.00001, 0.01, 0.5)):
        assert sim.tick_size(pair) == tick
        assert lo < sim.mid_price(pair, T0) < hi
        for e in sim.events(pair, T0, T0 + 5_000):
            if type(e) is Trade:
                assert abs(e.price / tick - round(e.price / tick)) < 1e-6


def test_cross_rates_are_consistent_and_unknown_assets_get_a_stable_price():
    sim = SimulatorSource(seed=0)
    eth_btc = sim.mid_price(PairRef("binance", "ETH", "BTC"), T0)
    assert eth_btc == pytest.approx(sim.mid_price(ETH, T0) / sim.mid_price(BTC, T0), rel=0.003)
    eur = sim.mid_price(PairRef("kraken", "BTC", "EUR"), T0)
    assert 0.8 < eur / sim.mid_price(BTC, T0) < 1.0
    foo = PairRef("binance", "FOOBAR", "USDT")
    assert sim.mid_price(foo, T0) == SimulatorSource(seed=0).mid_price(foo, T0) > 0
    assert any(type(e) is Trade for e in sim.events(foo, T0, T0 + 60_000))


def test_price_moves_like_crypto_over_days():
    sim = SimulatorSource(seed=8)
    days = [math.log(sim.mid_price(BTC, T0 + i * DAY_MS)) for i in range(120)]
    daily = statistics.pstdev(b - a for a, b in zip(days, days[1:]))
    assert 0.01 < daily < 0.07


def test_activity_is_higher_in_the_afternoon_utc():
    sim = SimulatorSource(seed=0)
    midnight = T0 - 12 * HOUR_MS
    afternoon = statistics.fmean(sim.activity(BTC, midnight + d * DAY_MS + 17 * HOUR_MS) for d in range(14))
    early = statistics.fmean(sim.activity(BTC, midnight + d * DAY_MS + 7 * HOUR_MS) for d in range(14))
    assert afternoon > 1.5 * early


# -- episodes --------------------------------------------------------------------------------
def test_random_episodes_cover_the_three_schemes_with_their_directions():
    sim = SimulatorSource(seed=21, episodes_per_hour=40)
    episodes = sim.episodes_between(BTC, T0, T0 + 6 * HOUR_MS)
    assert 150 <= len(episodes) <= 330
    assert {e.scheme for e in episodes} == set(SCHEMES)
    for e in episodes:
        assert e.kind == e.scheme and e.pair == BTC
        assert e.start_ms // MINUTE_MS == e.end_ms // MINUTE_MS, "inside one minute block"
        assert e.start_ms <= e.collapse_start_ms <= e.end_ms
        expected = {"layering": {"bid": "up", "ask": "down"}, "flipping": {"bid": "up", "ask": "down"},
                    "vacuuming": {"bid": "down", "ask": "up"}}[e.scheme][e.side]
        assert e.direction == expected


def test_episode_labels_are_deterministic_and_split_invariant():
    a = SimulatorSource(seed=4, episodes_per_hour=20, hard_negatives=True)
    b = SimulatorSource(seed=4, episodes_per_hour=20, hard_negatives=True)
    whole = a.episodes_between(ETH, T0, T0 + 2 * HOUR_MS)
    first = b.episodes_between(ETH, T0, T0 + HOUR_MS)
    second = b.episodes_between(ETH, T0 + HOUR_MS, T0 + 2 * HOUR_MS)
    union = {(e.kind, e.start_ms) for e in first} | {(e.kind, e.start_ms) for e in second}
    assert union == {(e.kind, e.start_ms) for e in whole}
    assert whole == a.episodes_between(ETH, T0, T0 + 2 * HOUR_MS)
    assert SimulatorSource(seed=5, episodes_per_hour=20).episodes_between(ETH, T0, T0 + HOUR_MS) != [
        e for e in whole if e.start_ms < T0 + HOUR_MS and e.scheme]


def test_hard_negatives_are_labelled_by_kind_without_a_scheme():
    sim = SimulatorSource(seed=6, hard_negatives=12.0)
    negatives = sim.episodes_between(BTC, T0, T0 + 8 * HOUR_MS)
    assert {e.kind for e in negatives} == set(HARD_NEGATIVES)
    assert all(e.scheme is None and e.direction is None and not e.is_spoof for e in negatives)
    assert any(e.kind == "patient_far" and e.end_ms - e.start_ms > 2 * MINUTE_MS for e in negatives)


def test_no_episodes_by_default():
    assert SimulatorSource(seed=1).episodes_between(BTC, T0, T0 + DAY_MS) == []


def side_changes(events, side, start, end):
    """(ts, price, qty change) for every level change on one side between start and end."""
    b = BarBuilder(BTC)
    out = []
    for e in events:
        if type(e) is BookDelta and start <= e.ts_ms <= end:
            before = dict(b.book()[0 if side == "bid" else 1])
            for price, qty in (e.bids if side == "bid" else e.asks):
                out.append((e.ts_ms, price, qty - before.get(price, 0.0)))
        b.feed(e)
    return out


def median_level(events, side):
    """Median size of the ten levels nearest the touch in the first snapshot."""
    snap = next(e for e in events if type(e) is BookSnapshot)
    return statistics.median(q for _p, q in (snap.bids if side == "bid" else snap.asks)[:10])


def test_a_layering_episode_shows_large_adds_then_a_cancel_cluster():
    ep = Episode("layering", "bid", None, T0 + 10_000, T0 + 25_000, T0 + 25_800,
                 {"layers": 4, "size_ratios": [12.0, 10.0, 15.0, 9.0], "build_ms": 1_500,
                  "cancel_fraction": 1.0, "opposite_trade": False})
    assert ep.direction == "up" and ep.kind == "layering"
    sim = SimulatorSource(seed=12, episodes=[ep])
    events = list(sim.events(BTC, T0, T0 + MINUTE_MS))
    (label,) = sim.episodes_between(BTC, T0, T0 + MINUTE_MS)
    assert label.start_ms == ep.start_ms and label.parameters["layers"] == 4
    typical = median_level(events, "bid")
    adds = [c for c in side_changes(events, "bid", ep.start_ms, ep.start_ms + 1_500) if c[2] > 4 * typical]
    assert len(adds) >= 4
    added = {p: q for _t, p, q in adds}
    pulled = {p for _t, p, q in side_changes(events, "bid", ep.collapse_start_ms, ep.end_ms)
              if p in added and -q >= 0.8 * added[p]}
    assert len(pulled) >= 3, "most layers are cancelled inside the labelled collapse"
    quiet = SimulatorSource(seed=12).events(BTC, T0, T0 + MINUTE_MS)
    assert list(quiet) != events


def test_a_flipping_episode_cancels_the_spoof_and_trades_the_other_way():
    ep = Episode("flipping", "ask", None, T0 + 20_000, T0 + 24_000, T0 + 24_150,
                 {"size_ratio": 15.0, "cancel_fraction": 1.0, "flip_mode": "aggressive", "flip_ratio": 0.8,
                  "distance_ticks": 0})
    sim = SimulatorSource(seed=13, episodes=[ep])
    events = list(sim.events(BTC, T0, T0 + MINUTE_MS))
    typical = median_level(events, "ask")
    (add,) = [c for c in side_changes(events, "ask", ep.start_ms, ep.start_ms) if c[2] > 4 * typical]
    cancels = [c for c in side_changes(events, "ask", ep.collapse_start_ms, ep.collapse_start_ms)
               if c[2] < 0 and c[1] == add[1]]
    assert sum(-q for _t, _p, q in cancels) >= 0.5 * add[2]
    flip = [e for e in events if type(e) is Trade and e.ts_ms == ep.end_ms and e.side == "buy"]
    assert sum(t.qty for t in flip) >= 0.5 * add[2]
    assert ep.direction == "down"


def usual_book(events, side):
    """Medians over the events' seconds, as a rolling baseline sees them: the side's top-20
    depth and the taker volume of one second."""
    b = BarBuilder(BTC)
    depth, taker, next_ms = [], {}, events[0].ts_ms
    for e in events:
        b.feed(e)
        if type(e) is Trade:
            taker[e.ts_ms // 1000] = taker.get(e.ts_ms // 1000, 0.0) + e.qty
        elif type(e) in BOOK and e.ts_ms >= next_ms:
            next_ms += 1000
            depth.append(sum(q for _p, q in b.book()[0 if side == "bid" else 1][:20]))
    seconds = range(events[0].ts_ms // 1000, events[-1].ts_ms // 1000 + 1)
    return statistics.median(depth), statistics.median(taker.get(s, 0.0) for s in seconds)


def test_a_spoof_is_large_against_the_books_usual_depth_not_only_the_depth_of_the_moment():
    # DETECTION.md's large add is 15 % of the side's top-20 depth, a 30-minute baseline
    ep = Episode("flipping", "bid", None, T0 + 20_000, T0 + 24_000, T0 + 24_150,
                 {"size_ratio": 1.0, "depth_share": 0.3, "cancel_fraction": 1.0, "flip_mode": "mirror",
                  "flip_ratio": 0.8, "distance_ticks": 1, "mirror_rest_ms": 2_000})
    events = list(SimulatorSource(seed=13, episodes=[ep]).events(BTC, T0, T0 + MINUTE_MS))
    usual_depth, _taker = usual_book(list(SimulatorSource(seed=13).events(BTC, T0, T0 + MINUTE_MS)), "bid")
    (add,) = [c for c in side_changes(events, "bid", ep.start_ms, ep.start_ms) if c[2] > 0.1 * usual_depth]
    assert add[2] >= 0.8 * 0.3 * usual_depth  # the calibration's usual depth, measured on other minutes


def test_a_clear_aggressive_flip_trades_at_least_three_typical_taker_seconds():
    ep = Episode("flipping", "ask", None, T0 + 20_000, T0 + 24_000, T0 + 24_150,
                 {"size_ratio": 8.0, "cancel_fraction": 1.0, "flip_mode": "aggressive", "flip_ratio": 0.002,
                  "distance_ticks": 0})
    events = list(SimulatorSource(seed=13, episodes=[ep]).events(BTC, T0, T0 + MINUTE_MS))
    _depth, taker_second = usual_book(list(SimulatorSource(seed=13).events(BTC, T0, T0 + MINUTE_MS)), "ask")
    flip = sum(e.qty for e in events if type(e) is Trade and e.ts_ms == ep.end_ms and e.side == "buy")
    assert flip >= 0.8 * 3.6 * taker_second
    near_miss = Episode("flipping", "ask", None, T0 + 20_000, T0 + 24_000, T0 + 24_150,
                        {**ep.parameters, "near_miss": "flip_ratio"})
    events = list(SimulatorSource(seed=13, episodes=[near_miss]).events(BTC, T0, T0 + MINUTE_MS))
    flip = sum(e.qty for e in events if type(e) is Trade and e.ts_ms == ep.end_ms and e.side == "buy")
    assert flip < taker_second, "a near miss of the flip's size keeps its small flip"


def test_a_vacuuming_episode_builds_then_pulls_one_sides_depth():
    ep = Episode("vacuuming", "ask", None, T0 + 5_000, T0 + 15_000, T0 + 15_400,
                 {"depth_multiplier": 3.0, "pull_fraction": 1.0, "levels": 5, "build_ms": 2_000})
    sim = SimulatorSource(seed=14, episodes=[ep])
    events = list(sim.events(XRP, T0, T0 + MINUTE_MS))

    def top10(ts):
        b = BarBuilder(BTC)
        for e in events:
            if e.ts_ms > ts:
                break
            b.feed(e)
        bids, asks = b.book()
        return sum(q for _p, q in bids[:10]), sum(q for _p, q in asks[:10])

    bid0, ask0 = top10(ep.start_ms - 1)
    bid1, ask1 = top10(ep.collapse_start_ms - 1)
    bid2, ask2 = top10(ep.end_ms)
    assert ask1 > 1.8 * ask0, "the ask side became unusually deep"
    assert ask2 < 0.6 * ask1, "and was pulled"
    assert bid2 > 0.7 * bid1, "the other side stayed"
    assert ep.direction == "up"


def test_an_episode_records_how_much_of_its_depth_still_rested_when_its_pull_began():
    ep = Episode("vacuuming", "ask", None, T0 + 5_000, T0 + 15_000, T0 + 15_400,
                 {"depth_multiplier": 3.0, "pull_fraction": 1.0, "levels": 5, "build_ms": 2_000})
    sim = SimulatorSource(seed=14, episodes=[ep])
    assert sim.resting_at_pull(XRP, ep) == pytest.approx(1.0, abs=0.05), "a quiet book left the depth to pull"

    block = _Block(sim, sim._profile(BTC), T0 // MINUTE_MS, random.Random(1), [])
    book = block.book
    for tick in (100, 98, 97, 96):
        book.set_level(True, tick, 10)
    book.set_level(False, 102, 10)
    spoof = book.place(True, 99, 40)
    book.market(False, 30)  # a seller takes the level in front and half the spoof
    block.note_resting(ep, [spoof])
    book.pull(spoof)
    block.note_resting(ep, [spoof])
    assert block.resting_at_pull[(ep.kind, ep.side, ep.start_ms)] == 0.5, "measured once, as the pull began"


def test_an_order_moved_back_into_view_stays_the_order_it_was():
    sim = SimulatorSource(seed=3)
    block = _Block(sim, sim._profile(BTC), T0 // MINUTE_MS, random.Random(1), [])
    book = block.book
    for tick in (100, 90, 89, 88):
        book.set_level(True, tick, 10)
    book.set_level(False, 102, 10)
    spoof = book.place(True, 99, 40)
    book.market(False, 30)  # takes the level in front and 20 of the order
    moved = book.move(spoof, 95)
    assert (moved.tick, moved.rem, moved.orig, moved.filled) == (95, 20, 40, 20)
    assert 99 not in book.bids and book.bids[95] == 20
    ep = Episode("vacuuming", "bid", None, T0 + 5_000, T0 + 15_000, T0 + 15_400)
    block.note_resting(ep, [moved])
    assert block.resting_at_pull[(ep.kind, ep.side, ep.start_ms)] == 0.5, "what takers filled before the move counts"
    book.market(False, 20)
    assert book.move(moved, 90) is None, "nothing left to move"


def test_quotes_behind_a_standing_wall_are_not_run_over_until_the_wall_is_pulled():
    """A tracked order is a wall the fair price waits behind: the quotes it protects stay
    while it stands (their cancelling read as a side's depth pulled), and only once it is
    pulled are they run over."""
    sim = SimulatorSource(seed=3)
    block = _Block(sim, sim._profile(BTC), T0 // MINUTE_MS, random.Random(1), [])
    book = block.book
    for tick in (100, 99, 98, 97, 96, 90):
        book.set_level(True, tick, 10)
    for tick in (102, 103, 110):
        book.set_level(False, tick, 10)
    wall = book.place(True, 99, 50)
    block.r = 95.5

    cross(block)
    assert 100 not in book.bids, "the quote in front of the wall is run over"
    assert book.bids[99] == 50, "the wall stands, its background settled"
    assert [book.bids[t] for t in (98, 97, 96, 90)] == [10, 10, 10, 10], "the quotes behind it stay"

    book.pull(wall)
    cross(block)
    assert book.bid_ticks == [90], "with the wall gone, price runs over the quotes it protected"


def test_a_patient_far_order_rests_across_minute_snapshots_until_cancelled():
    ep = Episode(None, "bid", None, T0 + 30_000, T0 + 190_000, T0 + 190_000, {"distance_frac": 0.006},
                 kind="patient_far")
    sim = SimulatorSource(seed=15, episodes=[ep])
    (label,) = sim.episodes_between(BTC, T0, T0 + 5 * MINUTE_MS)
    price, qty = label.parameters["price"], label.parameters["qty"]
    events = list(sim.events(BTC, T0, T0 + 5 * MINUTE_MS))
    snaps = {e.ts_ms: dict(e.bids) for e in events if type(e) is BookSnapshot}
    for minute in (1, 2, 3):
        assert snaps[T0 + minute * MINUTE_MS].get(price, 0.0) >= qty - 1e-9
    assert snaps[T0 + 4 * MINUTE_MS].get(price, 0.0) < qty
    (pull,) = [c for c in side_changes(events, "bid", ep.end_ms, ep.end_ms) if c[1] == price]
    assert pull[2] <= -qty + 1e-9


def test_random_episodes_appear_in_the_event_flow():
    sim = SimulatorSource(seed=22, episodes_per_hour=60)
    events = list(sim.events(ETH, T0, T0 + 20 * MINUTE_MS))
    episodes = [e for e in sim.episodes_between(ETH, T0, T0 + 20 * MINUTE_MS) if e.scheme == "layering"]
    assert episodes
    for ep in episodes:
        changes = side_changes(events, ep.side, ep.start_ms, ep.start_ms + ep.parameters["build_ms"])
        minute = [e for e in events if type(e) is BookSnapshot and e.ts_ms == ep.start_ms - ep.start_ms % MINUTE_MS]
        near_touch = (minute[0].bids if ep.side == "bid" else minute[0].asks)[:20]
        typical = statistics.median(q for _p, q in near_touch)
        big = [c for c in changes if c[2] > 2 * typical]
        assert len(big) >= len(ep.parameters["distances_ticks"]) - 1


def test_an_explicit_episode_must_stay_inside_a_minute():
    with pytest.raises(ValueError):
        SimulatorSource(episodes=[Episode("layering", "bid", None, T0 + 50_000, T0 + 55_000, T0 + 65_000)])


# -- synthesized bars --------------------------------------------------------------------------
def test_synthesized_hour_bars_are_internally_consistent():
    sim = SimulatorSource(seed=30)
    bars = sim.synthesize_bars(BTC, T0, T0 + 3 * DAY_MS, "hour")
    assert [b.ts_ms for b in bars] == [T0 + i * HOUR_MS for i in range(72)]
    for b in bars:
        assert b.trade_count > 100
        assert b.high >= max(b.open, b.close) and b.low <= min(b.open, b.close)
        assert b.low <= b.price_mean <= b.high
        assert 0 <= b.price_variance <= ((b.high - b.low) / 2) ** 2 + 1e-9
        assert b.low <= b.vwap <= b.high
        assert b.buy_volume + b.sell_volume == pytest.approx(b.volume)
        assert b.book_samples == 3600 and b.bid_depth > 0 and b.ask_depth > 0
        assert b.bid_notional_sum < b.bid_amount_sum * b.high
        assert b.quote_count > 0 and b.spread_bps_min <= b.spread_bps_sum / b.quote_count <= b.spread_bps_max
        assert b.bid_price < b.ask_price


def test_twenty_four_hour_bars_merge_into_the_day_bar():
    sim = SimulatorSource(seed=31)
    day0 = T0 - T0 % DAY_MS
    days = sim.synthesize_bars(ETH, day0, day0 + 3 * DAY_MS, "day")
    hours = sim.synthesize_bars(ETH, day0, day0 + 3 * DAY_MS, "hour")
    assert len(days) == 3 and len(hours) == 72
    for i, day in enumerate(days):
        assert day == merge(hours[i * 24:(i + 1) * 24], day0 + i * DAY_MS)
        assert day.book_samples == 86_400


def test_synthesized_bars_do_not_depend_on_the_requested_range():
    a = SimulatorSource(seed=32).synthesize_bars(XRP, T0, T0 + 10 * HOUR_MS, "hour")
    b = SimulatorSource(seed=32).synthesize_bars(XRP, T0 + 4 * HOUR_MS + 5, T0 + 10 * HOUR_MS, "hour")
    assert a[4:] == b
    m = SimulatorSource(seed=32).synthesize_bars(XRP, T0, T0 + 30 * MINUTE_MS, "minute")
    assert len(m) == 30 and m[7:] == SimulatorSource(seed=32).synthesize_bars(XRP, T0 + 7 * MINUTE_MS, T0 + 30 * MINUTE_MS, "minute")


def test_synthesized_prices_follow_the_event_mid_path():
    sim = SimulatorSource(seed=33)
    for b in sim.synthesize_bars(BTC, T0, T0 + 48 * HOUR_MS, "hour"):
        assert b.open == pytest.approx(sim.mid_price(BTC, b.ts_ms), rel=2e-4)
        assert b.close == pytest.approx(sim.mid_price(BTC, b.ts_ms + HOUR_MS), rel=2e-4)


def test_synthesized_minute_bars_resemble_event_built_ones():
    sim = SimulatorSource(seed=34)
    minutes = 20
    built = build_bars(sim.events(ETH, T0, T0 + minutes * MINUTE_MS), ETH, T0, T0 + minutes * MINUTE_MS,
                       interval_ms=MINUTE_MS)
    synth = sim.synthesize_bars(ETH, T0, T0 + minutes * MINUTE_MS, "minute")

    def mean(bars, f):
        return statistics.fmean(f(b) for b in bars)

    for f in (lambda b: b.trade_count, lambda b: b.volume, lambda b: b.bid_depth, lambda b: b.ask_depth,
              lambda b: b.bid_orders_sum / b.book_samples, lambda b: b.quote_count,
              lambda b: b.spread_bps_sum / b.quote_count, lambda b: (b.high - b.low) / b.low):
        assert 0.5 < mean(synth, f) / mean(built, f) < 2.0
    for s, e in zip(synth, built):
        assert s.close == pytest.approx(e.close, rel=1e-3)


def test_synthesize_rejects_unknown_granularity():
    with pytest.raises(ValueError):
        SimulatorSource().synthesize_bars(BTC, T0, T0 + HOUR_MS, "week")


def test_a_resting_vacuuming_episode_keeps_its_depth_in_view_and_price_moves_into_the_gap():
    # a long rest: the imbalance the depth causes moves price, and the orders follow the touch
    ep = Episode("vacuuming", "ask", None, T0 + 5_000, T0 + 30_000, T0 + 30_300,
                 {"depth_multiplier": 3.0, "pull_fraction": 0.9, "levels": 5, "build_ms": 2_000, "kick_sigma": 2.0})
    events = list(SimulatorSource(seed=16, episodes=[ep]).events(BTC, T0, T0 + MINUTE_MS))
    quiet = list(SimulatorSource(seed=16).events(BTC, T0, T0 + MINUTE_MS))

    def book_at(evs, ts):
        b = BarBuilder(BTC)
        for e in evs:
            if e.ts_ms > ts:
                break
            b.feed(e)
        return b.book()

    def mid(book):
        bids, asks = book
        return (bids[0][0] + asks[0][0]) / 2

    _bids, asks = book_at(events, ep.collapse_start_ms - 1)
    _bids, quiet_asks = book_at(quiet, ep.collapse_start_ms - 1)
    assert sum(q for _p, q in asks[:10]) > 1.5 * sum(q for _p, q in quiet_asks[:10]), \
        "the ten best asks are still far deeper than without the episode when pulled"
    assert mid(book_at(events, ep.end_ms + 1_000)) > mid(book_at(events, ep.collapse_start_ms - 1)), \
        "price moved up into the pulled asks' gap"
