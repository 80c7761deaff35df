"""Scheme detectors: book updates per second through DetectorEngine on one core, against
the bar builder on the same events (what ingestion already does per update).

    python bench/bench_detectors.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from market.sources.bar_builder import BarBuilder  # noqa: E402
from market.sources.events import BookDelta, BookSnapshot, PairRef  # noqa: E402
from market.sources.simulator import SimulatorSource  # noqa: E402
from schemes.detectors import DetectorEngine  # noqa: E402
from schemes.evaluation import DEFAULT_START_MS  # noqa: E402

PAIR = PairRef("binance", "BTC", "USDT")
MINUTES = 20


def run() -> list[dict]:
    source = SimulatorSource(seed=7, episodes_per_hour=12.0, hard_negatives=True)
    events = list(source.events(PAIR, DEFAULT_START_MS, DEFAULT_START_MS + MINUTES * 60_000))
    updates = sum(len(e.bids) + len(e.asks) for e in events if type(e) in (BookDelta, BookSnapshot))
    engine = DetectorEngine(PAIR, tick_size=source.tick_size(PAIR))
    started = time.perf_counter()
    found = engine.feed_many(events)
    detect_s = time.perf_counter() - started
    builder = BarBuilder(PAIR)
    started = time.perf_counter()
    for event in events:
        builder.feed(event)
    builder.flush(DEFAULT_START_MS + MINUTES * 60_000)
    build_s = time.perf_counter() - started
    per_s = updates / detect_s
    return [{
        "figure": f"Scheme detectors: book level updates/s, 1 core (simulated BTC-USDT, {MINUTES} min, 12 episodes/h)",
        "value": f"{per_s:,.0f}",
        "comparison": f"bar builder on the same {updates:,} updates: {updates / build_s:,.0f}/s; "
                      f"{len(found)} events detected",
        "goal": ">= 20,000 book updates/s per core", "met": per_s >= 20_000,
    }]


if __name__ == "__main__":
    for row in run():
        print(row)
