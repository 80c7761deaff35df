"""The second market generator: a deterministic, well-formed feed whose labels match what
it shows. No database."""

from __future__ import annotations

import math
from statistics import median

import pytest

from market.sources.events import BookDelta, BookSnapshot, PairRef, Trade
from market.sources.second_market import Episode, SecondMarketSource
from market.sources.second_market.episodes import NEAR_MISSES

pytestmark = pytest.mark.heavy

HOUR = 3_600_000
SPARSE_PAIR = PairRef("sim2", "BTC", "USDT")
DENSE_PAIR = PairRef("sim2", "DOGE", "USDT")
T0 = 500 * HOUR  # an arbitrary hour far from the epoch


@pytest.fixture(scope="module")
def source():
    return SecondMarketSource(seed=11, episodes_per_hour=30.0)


@pytest.fixture(scope="module", params=["sparse", "dense"])
def hour(request, source):
    pair = SPARSE_PAIR if request.param == "sparse" else DENSE_PAIR
    events = list(source.events(pair, T0, T0 + HOUR))
    return pair, events, source.episodes_between(pair, T0, T0 + HOUR)


def _replay(events, before=False):
    """(event, bids, asks) after each event (or just before it), as a consumer of the feed
    would hold the book."""
    bids, asks = {}, {}
    for ev in events:
        if before:
            yield ev, bids, asks
        if type(ev) is BookSnapshot:
            bids, asks = dict(ev.bids), dict(ev.asks)
        elif type(ev) is BookDelta:
            for p, q in ev.bids:
                if q:
                    bids[p] = q
                else:
                    bids.pop(p, None)
            for p, q in ev.asks:
                if q:
                    asks[p] = q
                else:
                    asks.pop(p, None)
        if not before:
            yield ev, bids, asks


def test_the_two_classes_are_chosen_by_the_pair(source):
    assert source.pair_class(SPARSE_PAIR) == "sparse" and source.tick_size(SPARSE_PAIR) == 0.1
    assert source.pair_class(DENSE_PAIR) == "dense" and source.tick_size(DENSE_PAIR) == 0.0001
    other = PairRef("sim2", "ZZZ", "USDT")
    assert source.pair_class(other) == SecondMarketSource(seed=99).pair_class(other)


def test_two_instances_with_one_seed_give_the_same_events_and_labels(hour, source):
    pair, events, episodes = hour
    again = SecondMarketSource(seed=11, episodes_per_hour=30.0)
    middle = list(again.events(pair, T0 + 600_000, T0 + 900_000))
    assert middle[1:] == [e for e in events if T0 + 600_000 <= e.ts_ms < T0 + 900_000]
    window = list(again.events(pair, T0, T0 + HOUR))
    assert window == events
    assert again.episodes_between(pair, T0, T0 + HOUR) == episodes


def test_another_seed_gives_another_feed(source):
    # the seed is used alike by both classes: the sparse one, cheaper to generate, shows it
    other = SecondMarketSource(seed=12, episodes_per_hour=30.0)
    assert list(other.events(SPARSE_PAIR, T0, T0 + 60_000)) != list(source.events(SPARSE_PAIR, T0, T0 + 60_000))


def test_splitting_a_window_gives_the_same_events(hour, source):
    pair, events, _ = hour
    # on an hour boundary the split is exact
    two = list(source.events(pair, T0 - HOUR + 3_000_000, T0)) + list(source.events(pair, T0, T0 + 120_000))
    assert two == list(source.events(pair, T0 - HOUR + 3_000_000, T0 + 120_000))
    # anywhere else the second window only adds its opening snapshot: the book the first built
    b = T0 + 1_234_567
    first = list(source.events(pair, T0, b))
    second = list(source.events(pair, b, T0 + 1_500_000))
    assert type(second[0]) is BookSnapshot and second[0].ts_ms == b
    assert first + second[1:] == [e for e in events if e.ts_ms < T0 + 1_500_000]
    *_, (_, bids, asks) = _replay(first)
    assert dict(second[0].bids) == bids and dict(second[0].asks) == asks
    assert list(second[0].bids) == sorted(second[0].bids, reverse=True)


def test_every_window_opens_with_a_snapshot_and_is_time_ordered(hour, source):
    pair, events, _ = hour
    assert type(events[0]) is BookSnapshot and events[0].ts_ms == T0
    for start in (T0 + 1, T0 + 777_777):
        got = list(source.events(pair, start, start + 5_000))
        assert type(got[0]) is BookSnapshot and got[0].ts_ms == start
        assert all(start <= e.ts_ms < start + 5_000 for e in got)
    assert all(a.ts_ms <= b.ts_ms for a, b in zip(events, events[1:]))


def test_the_book_never_crosses_and_shows_its_class_depth(hour, source):
    pair, events, _ = hour
    cls = source.pair_class(pair)
    limit = 50 if cls == "sparse" else 25
    tick = source.tick_size(pair)
    gaps, most = [], 0
    for i, (ev, bids, asks) in enumerate(_replay(events)):
        if bids and asks:
            assert max(bids) < min(asks), ev
        assert len(bids) <= limit and len(asks) <= limit
        most = max(most, len(bids), len(asks))
        if i % 2000 == 0 and len(bids) > 10:
            top = sorted(bids, reverse=True)[:20]
            gaps += [round((a - b) / tick) for a, b in zip(top, top[1:])]
    assert most == limit
    if cls == "sparse":
        assert median(gaps) >= 3 and max(gaps) >= 20  # sparse: several ticks, irregular
    else:
        assert median(gaps) == 1  # dense: most ticks near the touch occupied


def test_every_price_is_on_the_tick_grid(hour, source):
    pair, events, _ = hour
    tick = source.tick_size(pair)

    def on_grid(p):
        return abs(p / tick - round(p / tick)) < 1e-6

    for ev in events:
        if type(ev) is Trade:
            assert on_grid(ev.price) and ev.qty > 0
        else:
            assert all(on_grid(p) and q >= 0 for p, q in ev.bids + ev.asks)


def test_both_classes_trade_and_are_busy(hour, source):
    pair, events, _ = hour
    trades = [e for e in events if type(e) is Trade]
    updates = sum(len(e.bids) + len(e.asks) for e in events if type(e) is BookDelta) / 3600
    assert len(trades) > 3600
    assert {t.side for t in trades} == {"buy", "sell"}
    if source.pair_class(pair) == "dense":
        assert 50 <= updates <= 150
    else:
        assert 10 <= updates < 80  # busy, but well below the dense class


def test_episodes_are_labelled_and_inside_the_window(hour, source):
    pair, _, episodes = hour
    assert {e.scheme for e in episodes} == {"layering", "flipping", "vacuuming", None}
    for e in episodes:
        assert isinstance(e, Episode) and e.pair == pair
        assert T0 <= e.start_ms <= e.collapse_start_ms <= e.end_ms < T0 + HOUR
        if e.scheme:
            assert e.kind == e.scheme and e.side in ("bid", "ask")
            assert e.direction == ({"bid": "up", "ask": "down"}[e.side] if e.scheme != "vacuuming"
                                   else {"bid": "down", "ask": "up"}[e.side])
            share = source.resting_at_pull(pair, e)
            assert share is not None and 0 <= share <= 1
        else:
            assert e.direction is None and source.resting_at_pull(pair, e) is None
            assert e.side in ("bid", "ask", "both") and "near_miss" not in e.parameters
    # no label leaks out of a narrower window
    mid = T0 + HOUR // 2
    assert all(mid <= e.start_ms and e.end_ms < T0 + HOUR for e in source.episodes_between(pair, mid, T0 + HOUR))


def test_a_spoofing_episodes_child_orders_show_in_the_book_before_its_collapse(hour, source):
    pair, events, episodes = hour
    clear = [e for e in episodes if e.scheme and "near_miss" not in e.parameters]
    assert clear
    checks = sorted((e.collapse_start_ms, e) for e in clear)
    seen = shown = 0
    it = iter(checks)
    at, ep = next(it)
    for ev, bids, asks in _replay(events, before=True):
        while ep is not None and ev.ts_ms >= at:
            orders = [o for o in ep.parameters["orders"] if o["placed_ms"] < at and o["tag"] != "mirror"]
            assert len(orders) >= (3 if ep.scheme == "layering" else 2)
            assert len({o["placed_ms"] for o in orders}) >= 2  # several actions, not one level change
            for o in orders:
                if o["filled"] >= o["qty"]:
                    continue  # takers took it all before the pull (resting_at_pull says so)
                book = bids if o["side"] == "bid" else asks
                seen += 1
                if o["price"] in book:
                    shown += 1
                    assert book[o["price"]] >= o["qty"] - o["filled"] - 1e-9
            at, ep = next(it, (None, None))
        if ep is None:
            break
    assert shown >= 0.9 * seen


def _broken(e: Episode) -> set[str]:
    """Which of DETECTION.md's thresholds the drawn parameters break."""
    p, out = e.parameters, set()
    if e.scheme == "layering":
        near = sum(1 for mode, d in p["distances"] if mode == "ticks" and 1 <= d <= 25) + sum(
            1 for mode, _ in p["distances"] if mode == "levels")
        checks = {"n_levels": len(p["distances"]) >= 3, "build_ms": p["build_ms"] <= 3000,
                  "behind_ticks": near >= 2, "removed_fraction": p["removed_fraction"] >= 0.7,
                  "collapse_window": p["rest_ms"] < 60_000, "size_factor": p["size_factor"] >= 1}
    elif e.scheme == "flipping":
        flip_ok = p["flip_factor"] >= 1 if p["mode"] == "aggressive" else p["mirror_ratio"] >= 0.5
        checks = {"touch_distance": p["touch_distance"] <= 2, "life_ms": p["life_ms"] <= 10_000,
                  "cancel_fraction": p["cancel_fraction"] >= 0.8, "flip_size": flip_ok,
                  "flip_latency_ms": p["pull_spread_ms"] + p["flip_latency_ms"] + p["flip_spread_ms"] <= 1000,
                  "size_factor": p["size_factor"] >= 1}
    else:
        checks = {"depth_ratio": p["depth_ratio"] >= 1.5, "rest_ms": p["rest_ms"] >= 2000,
                  "pull_ms": p["pull_ms"] <= 1000, "removed_fraction": p["removed_fraction"] >= 0.5,
                  "executed": p["executed_share"] <= 0.2, "other_side": p["other_side_drop"] < 0.2}
    assert set(checks) == set(NEAR_MISSES[e.scheme])
    return {name for name, ok in checks.items() if not ok}


def test_near_misses_break_exactly_the_one_parameter_they_name(hour):
    _, _, episodes = hour
    spoofs = [e for e in episodes if e.scheme]
    near = [e for e in spoofs if "near_miss" in e.parameters]
    assert near and len(near) < len(spoofs)
    for e in spoofs:
        assert _broken(e) == ({e.parameters["near_miss"]} if "near_miss" in e.parameters else set()), e.parameters


def test_clear_episodes_spread_over_the_whole_allowed_range():
    """Uniform over the allowed ranges: the draws reach both ends, not a centre."""
    import random

    from market.sources.second_market.episodes import draw_spoof
    r = random.Random(5)
    draws = [draw_spoof(r, "flipping") for _ in range(2000)]
    clear = [d for d in draws if "near_miss" not in d]
    assert {d["touch_distance"] for d in clear} == {0, 1, 2}
    lives = [d["life_ms"] for d in clear]
    assert min(lives) < 800 and max(lives) > 9000
    share = len(draws) - len(clear)
    assert 0.2 < share / len(draws) < 0.3
    assert not math.isnan(median(lives))


# --- disrupted: an episode drawn clear judged as it happened (judge.py) ----------------------
# the feed of the fixture's hour before the scripts recorded anything more than they did at
# 3d76e5f: recording must take no draw and send no event
EVENTS_SHA256 = {"BTC": "eeeb345cd39f95ca05867fc299a85fdedb667dd96d0b8fb589d9a9e951330f85",
                 "DOGE": "c69550f64e097d4ff4e4b4781e0e607d368933f832c9f27ddd305c1792d3c77a"}


def test_a_seeds_events_are_unchanged_by_what_the_scripts_record(hour):
    import hashlib

    pair, events, _ = hour
    digest = hashlib.sha256()
    for ev in events:
        digest.update(repr(ev).encode())
        digest.update(b"\n")
    assert digest.hexdigest() == EVENTS_SHA256[pair.base]


def _clear(episodes, scheme):
    return [e for e in episodes if e.scheme == scheme and "near_miss" not in e.parameters]


def test_a_clear_episode_that_happened_as_drawn_is_not_disrupted(hour, source):
    pair, _, episodes = hour
    for scheme in ("layering", "flipping", "vacuuming"):
        as_drawn = [e for e in _clear(episodes, scheme) if source.disrupted(pair, e) is None]
        assert as_drawn, scheme
    for e in _clear(episodes, "layering"):
        if source.disrupted(pair, e) is None:
            orders = e.parameters["orders"]
            executed = sum(o["filled_by_pull_end"] for o in orders) / sum(o["qty"] for o in orders)
            assert executed <= 0.10 and e.parameters["pulls"]


def _with_layers_executed(e: Episode, share: float) -> Episode:
    """The same episode had takers executed `share` of every layer by the end of its pull."""
    import dataclasses

    orders = tuple({**o, "filled_by_pull_end": share * o["qty"], "filled": share * o["qty"]}
                   for o in e.parameters["orders"])
    filled = sum(o["filled_by_pull_end"] for o in orders)
    pulls = tuple((ms, lots, filled) for ms, lots, _ in e.parameters["pulls"])
    return dataclasses.replace(e, parameters={**e.parameters, "orders": orders, "pulls": pulls})


def test_layers_takers_executed_25_percent_of_are_disrupted_naming_the_10_percent_bound(hour, source):
    pair, _, episodes = hour
    e = next(e for e in _clear(episodes, "layering") if source.disrupted(pair, e) is None)
    reason = source.disrupted(pair, _with_layers_executed(e, 0.25))
    assert reason is not None and "executed > 10 % (25 %)" in reason
    assert source.disrupted(pair, _with_layers_executed(e, 0.05)) is None, "5 % executed is inside the bound"


def test_the_audits_layering_case_is_disrupted_by_what_takers_executed():
    """Seed 2, DOGE/USDT, the ask ladder from 1717421058558: drawn clear, 25 % of it filled."""
    pair = PairRef("binance", "DOGE", "USDT")
    src = SecondMarketSource(2, episodes_per_hour=12.0, hard_negatives=True)
    start = 1_717_419_600_000
    e = next(e for e in src.episodes_between(pair, start, start + HOUR) if e.start_ms == 1_717_421_058_558)
    assert e.scheme == "layering" and e.side == "ask" and "near_miss" not in e.parameters
    assert src.disrupted(pair, e) == "executed > 10 % (25 %)"
    assert src.resting_at_pull(pair, e) > 0.5, "the first rule (what rested at the pull) let it through"


def test_near_misses_and_hard_negatives_are_not_judged(hour, source):
    import dataclasses

    from market.sources.second_market.judge import broken_thresholds

    pair, _, episodes = hour
    near = [e for e in episodes if e.scheme and "near_miss" in e.parameters]
    assert near
    assert all(source.disrupted(pair, e) is None for e in near)
    # not for want of a broken threshold: judged as clear cases, some would be
    as_clear = [dataclasses.replace(e, parameters={k: v for k, v in e.parameters.items() if k != "near_miss"})
                for e in near]
    assert any(broken_thresholds(e) for e in as_clear)
    assert all(source.disrupted(pair, e) is None for e in episodes if e.scheme is None)


def test_every_reason_names_a_threshold_and_what_happened(hour, source):
    pair, _, episodes = hour
    reasons = [source.disrupted(pair, e) for e in episodes if e.scheme and "near_miss" not in e.parameters]
    assert any(reasons)
    for reason in filter(None, reasons):
        for part in reason.split("; "):
            threshold, _, happened = part.partition(" (")
            assert threshold and happened.endswith(")"), part
            assert any(c in threshold for c in "<>") or "later" in threshold, part


def _removed_by(e: Episode, ms: int) -> float:
    cancelled = sum(lots for at, lots, _ in e.parameters["pulls"] if at <= ms)
    filled = max((f for at, _, f in e.parameters["pulls"] if at <= ms), default=0.0)
    return (cancelled + filled) / sum(o["qty"] for o in e.parameters["orders"])


def test_a_clear_episode_completes_inside_itself_when_it_met_its_last_collapse_threshold(hour, source):
    pair, _, episodes = hour
    for e in (e for e in episodes if e.scheme and "near_miss" not in e.parameters and not source.disrupted(pair, e)):
        done = source.completed_ms(pair, e)
        assert done is not None and e.collapse_start_ms <= done <= e.end_ms, (e.scheme, e.start_ms)
        p = e.parameters
        if e.scheme == "layering":
            assert _removed_by(e, done) >= 0.70 - 1e-9 > _removed_by(e, done - 1), "70 % removed, not before"
        elif e.scheme == "flipping":
            flip = p["mirror_ms"] if p["mode"] == "mirror" else p["flip_trades"][0][0]
            assert done >= flip
        else:
            assert done >= p["move_ms"], "the mid had moved into the gap"
    assert all(source.completed_ms(pair, e) is None for e in episodes if e.scheme is None)


def test_a_layering_pulls_tail_a_minute_later_does_not_move_its_completion():
    """Seeds 1-2 hold clear ladders whose 70 % went in the pull's cluster and whose tail came
    seconds later: the episode ends with the tail, the case was whole at the cluster."""
    start = 1_717_419_600_000
    gaps = []
    for seed in (1, 2):
        src = SecondMarketSource(seed, episodes_per_hour=12.0, hard_negatives=True)
        for pair in (PairRef("binance", "BTC", "USDT"), PairRef("binance", "DOGE", "USDT")):
            for e in src.episodes_between(pair, start, start + HOUR):
                if e.scheme == "layering" and "near_miss" not in e.parameters and not src.disrupted(pair, e):
                    gaps.append(e.end_ms - src.completed_ms(pair, e))
    assert gaps and max(gaps) > 5_000 and min(gaps) >= 0
