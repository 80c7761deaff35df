"""ReplaySource and write_jsonl: recorded JSON-lines files back into events."""

import gzip
import json

import pytest

from market.sources.bar_builder import build_bars
from market.sources.events import BookDelta, BookSnapshot, PairRef, Quote, Trade
from market.sources.replay import ReplaySource, record, write_jsonl
from market.sources.simulator import SimulatorSource

BTC = PairRef("binance", "BTC", "USDT")
ETH = PairRef("binance", "ETH", "USDT")
T0 = 1_717_243_200_000

HAND_MADE = [
    BookSnapshot(T0, ((100.0, 1.5), (99.9, 2.0)), ((100.1, 1.0),)),
    Quote(T0, 100.0, 1.5, 100.1, 1.0),
    Trade(T0 + 5, 100.1, 0.25, "buy", "t-1"),
    Trade(T0 + 5, 100.1, 0.75, "buy", None),
    BookDelta(T0 + 5, (), ((100.1, 0.0), (100.2, 3.0))),
    BookDelta(T0 + 9, ((99.95, 0.1),), ()),
    Quote(T0 + 9, 100.0, 1.5, 100.2, 3.0),
]


@pytest.fixture(scope="module")
def sim_events():
    return list(SimulatorSource(seed=7).events(BTC, T0, T0 + 120_000))


@pytest.mark.parametrize("name", ["events.jsonl", "events.jsonl.gz"])
def test_writing_then_reading_gives_back_equal_events(tmp_path, sim_events, name):
    path = tmp_path / name
    events = HAND_MADE + [e for e in sim_events if e.ts_ms >= T0 + 10]
    assert write_jsonl(events, BTC, path) == len(events)
    replay = ReplaySource(path)
    assert list(replay.events(BTC, T0, T0 + 120_000)) == events
    assert replay.earliest_ms(BTC) == T0
    assert replay.latest_ms(BTC) == events[-1].ts_ms


def test_gzip_files_are_really_compressed(tmp_path, sim_events):
    write_jsonl(sim_events, BTC, tmp_path / "a.jsonl.gz")
    with gzip.open(tmp_path / "a.jsonl.gz", "rt") as fh:
        first = json.loads(fh.readline())
    assert first["type"] == "book_snapshot" and first["exchange"] == "binance" and first["ts_ms"] == T0


def test_the_line_format_is_the_documented_one(tmp_path):
    write_jsonl(HAND_MADE[:3], BTC, tmp_path / "a.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert lines[0] == {"type": "book_snapshot", "exchange": "binance", "base": "BTC", "quote": "USDT", "ts_ms": T0,
                        "bids": [[100.0, 1.5], [99.9, 2.0]], "asks": [[100.1, 1.0]]}
    assert lines[1] == {"type": "quote", "exchange": "binance", "base": "BTC", "quote": "USDT", "ts_ms": T0,
                        "bid_price": 100.0, "bid_qty": 1.5, "ask_price": 100.1, "ask_qty": 1.0}
    assert lines[2] == {"type": "trade", "exchange": "binance", "base": "BTC", "quote": "USDT", "ts_ms": T0 + 5,
                        "price": 100.1, "qty": 0.25, "side": "buy", "trade_id": "t-1"}


def test_a_window_returns_only_its_pair_and_time_range(tmp_path, sim_events):
    eth = list(SimulatorSource(seed=7).events(ETH, T0, T0 + 120_000))
    # one file holding both pairs, interleaved in time order
    merged = sorted([(e.ts_ms, 0, i, e) for i, e in enumerate(sim_events)] + [(e.ts_ms, 1, i, e) for i, e in enumerate(eth)])
    path = tmp_path / "both.jsonl"
    with open(path, "w") as fh:
        for _ts, which, _i, e in merged:
            write_jsonl([e], BTC if which == 0 else ETH, tmp_path / "one.jsonl")
            fh.write((tmp_path / "one.jsonl").read_text())
    replay = ReplaySource(path)
    assert replay.pairs() == [BTC, ETH]
    start, end = T0 + 33_333, T0 + 77_777
    assert list(replay.events(BTC, start, end)) == [e for e in sim_events if start <= e.ts_ms < end]
    assert list(replay.events(ETH, start, end)) == [e for e in eth if start <= e.ts_ms < end]
    assert list(replay.events(PairRef("BINANCE", "eth", "usdt"), start, end)) == list(replay.events(ETH, start, end))


def test_files_in_a_directory_are_merged_in_time_order(tmp_path, sim_events):
    half = T0 + 60_000
    write_jsonl([e for e in sim_events if e.ts_ms < half], BTC, tmp_path / "day" / "part-1.jsonl.gz")
    write_jsonl([e for e in sim_events if e.ts_ms >= half], BTC, tmp_path / "day" / "part-2.jsonl")
    trades = [e for e in sim_events if type(e) is Trade]
    write_jsonl(trades[:50], BTC, tmp_path / "extra.ndjson")
    replay = ReplaySource(tmp_path)
    assert len(replay.files) == 3
    got = list(replay.events(BTC, T0, T0 + 120_000))
    assert all(a.ts_ms <= b.ts_ms for a, b in zip(got, got[1:]))
    assert sorted(map(repr, got)) == sorted(map(repr, sim_events + trades[:50]))
    two = ReplaySource(tmp_path / "day")
    assert list(two.events(BTC, T0, T0 + 120_000)) == sim_events


def test_reading_a_late_window_of_a_long_file_matches_filtering(tmp_path):
    events = list(SimulatorSource(seed=8).events(ETH, T0, T0 + 15 * 60_000))
    assert len(events) > 2 * 4096
    write_jsonl(events, ETH, tmp_path / "long.jsonl")
    replay = ReplaySource(tmp_path / "long.jsonl")
    for start, end in ((T0 + 431_000, T0 + 432_500), (T0, T0 + 1), (T0 + 899_999, T0 + 999_000)):
        assert list(replay.events(ETH, start, end)) == [e for e in events if start <= e.ts_ms < end]


def test_a_recorded_simulator_window_replays_to_the_same_bars(tmp_path):
    sim = SimulatorSource(seed=9)
    assert record(sim, ETH, T0, T0 + 90_000, tmp_path / "rec.jsonl.gz") > 0
    replay = ReplaySource(tmp_path / "rec.jsonl.gz")
    assert build_bars(replay.events(ETH, T0, T0 + 90_000), ETH, T0, T0 + 90_000) == build_bars(
        sim.events(ETH, T0, T0 + 90_000), ETH, T0, T0 + 90_000)


def test_a_pair_not_in_the_files_has_no_events_and_no_earliest(tmp_path, sim_events):
    write_jsonl(sim_events[:10], BTC, tmp_path / "a.jsonl")
    replay = ReplaySource(tmp_path / "a.jsonl")
    assert replay.earliest_ms(ETH) is None
    assert list(replay.events(ETH, T0, T0 + 120_000)) == []


def write_lines(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return path


GOOD = json.dumps({"type": "trade", "exchange": "binance", "base": "BTC", "quote": "USDT", "ts_ms": T0,
                   "price": 1.0, "qty": 1.0, "side": "buy", "trade_id": None})


@pytest.mark.parametrize("bad, message", [
    ("{not json", "not valid JSON"),
    ('{"type": "trade", "exchange": "binance", "base": "BTC", "quote": "USDT", "ts_ms": 1, "price": 1.0, "qty": 1.0}',
     "needs field 'side'"),
    ('{"type": "candle", "exchange": "binance", "base": "BTC", "quote": "USDT", "ts_ms": 1}', "unknown type"),
    ('{"type": "quote", "exchange": "binance", "base": "BTC", "quote": "USDT", "ts_ms": "soon", '
     '"bid_price": 1, "bid_qty": 1, "ask_price": 2, "ask_qty": 1}', "ts_ms must be an integer"),
    ('{"type": "book_delta", "exchange": "binance", "base": "BTC", "quote": "USDT", "ts_ms": 1, "bids": [[1.0]]}',
     "bids entries must be"),
    ('{"type": "trade", "base": "BTC", "quote": "USDT", "ts_ms": 1, "price": 1.0, "qty": 1.0, "side": "buy"}',
     "exchange must be"),
    ('[1, 2, 3]', "JSON object"),
])
def test_a_bad_line_raises_a_value_error_naming_file_and_line(tmp_path, bad, message):
    path = write_lines(tmp_path / "bad.jsonl", [GOOD, GOOD, bad, GOOD])
    replay = ReplaySource(path)
    with pytest.raises(ValueError, match=message) as err:
        list(replay.events(BTC, 0, 2 * T0))
    assert f"{path}:3:" in str(err.value)


def test_a_file_going_back_in_time_is_rejected(tmp_path):
    later = GOOD.replace(str(T0), str(T0 + 10))
    path = write_lines(tmp_path / "order.jsonl", [later, GOOD])
    with pytest.raises(ValueError, match=r"order.jsonl:2: .*time order"):
        ReplaySource(path).earliest_ms(BTC)


def test_blank_lines_are_skipped(tmp_path):
    path = write_lines(tmp_path / "blank.jsonl", [GOOD, "", "   ", GOOD])
    assert len(list(ReplaySource(path).events(BTC, 0, 2 * T0))) == 2


def test_a_missing_path_is_reported():
    with pytest.raises(FileNotFoundError):
        ReplaySource("/nonexistent/replay/dir")


# -- windows in a row, book_lost lines, loops ------------------------------------------------

def test_consecutive_windows_in_any_split_equal_one_read(tmp_path, sim_events):
    import random

    path = tmp_path / "a.jsonl.gz"
    write_jsonl(sim_events, BTC, path)
    whole = list(ReplaySource(path).events(BTC, T0, T0 + 120_000))
    rng = random.Random(5)
    for _ in range(5):
        source = ReplaySource(path)
        cuts = sorted({T0, T0 + 120_000, *(rng.randrange(T0, T0 + 120_000) for _ in range(40))})
        pieces = [e for a, b in zip(cuts, cuts[1:]) for e in source.events(BTC, a, b)]
        assert pieces == whole
        again = list(source.events(BTC, T0 + 30_000, T0 + 60_000))  # a window that does not follow on
        assert again == [e for e in whole if T0 + 30_000 <= e.ts_ms < T0 + 60_000]


def test_windows_of_two_pairs_read_alternately_stay_exact(tmp_path, sim_events):
    eth = list(SimulatorSource(seed=7).events(ETH, T0, T0 + 60_000))
    merged = sorted([(e, BTC) for e in sim_events if e.ts_ms < T0 + 60_000] + [(e, ETH) for e in eth],
                    key=lambda item: item[0].ts_ms)
    path = tmp_path / "two.jsonl"
    with open(path, "wb"):
        pass
    for event, pair in merged:
        write_jsonl([event], pair, path, append=True)
    source = ReplaySource(path)
    got = {BTC: [], ETH: []}
    for start in range(T0, T0 + 60_000, 1_000):
        for pair in (BTC, ETH):
            got[pair].extend(source.events(pair, start, start + 1_000))
    assert got[BTC] == [e for e, p in merged if p == BTC] and got[ETH] == eth


def test_a_lost_book_is_written_and_read_back(tmp_path):
    from market.sources.events import BookLost

    events = HAND_MADE[:3] + [BookLost(T0 + 6, "sequence gap"), BookSnapshot(T0 + 7, ((100.0, 1.0),), ())]
    write_jsonl(events, BTC, tmp_path / "a.jsonl")
    assert list(ReplaySource(tmp_path / "a.jsonl").events(BTC, T0, T0 + 10)) == events


def test_a_looped_recording_plays_again_and_again_with_a_fresh_book_each_time(tmp_path, sim_events):
    from market.sources.events import BookLost
    from market.sources.replay import LoopedReplay

    recording = [e for e in sim_events if e.ts_ms < T0 + 10_500]
    write_jsonl(recording, BTC, tmp_path / "a.jsonl")
    anchor = 1_800_000_000_000
    looped = LoopedReplay(ReplaySource(tmp_path / "a.jsonl"), anchor)
    assert looped.period == 12_000 and looped.earliest_ms(BTC) == anchor and looped.latest_ms(BTC) is None
    three = list(looped.events(BTC, anchor - 5_000, anchor + 36_000))
    for play in range(3):
        start = anchor + play * 12_000
        shifted = [e for e in three if start <= e.ts_ms < start + 12_000]
        if play:
            assert shifted[0] == BookLost(start, "the recording starts again")
            shifted = shifted[1:]
        assert [dataclasses_replace(e, ts_ms=e.ts_ms - start + T0) for e in shifted] == recording
    cuts = [anchor, anchor + 7_777, anchor + 12_000, anchor + 12_001, anchor + 30_500, anchor + 36_000]
    fresh = LoopedReplay(ReplaySource(tmp_path / "a.jsonl"), anchor)
    assert [e for a, b in zip(cuts, cuts[1:]) for e in fresh.events(BTC, a, b)] == three


def dataclasses_replace(event, **changes):
    import dataclasses

    return dataclasses.replace(event, **changes)
