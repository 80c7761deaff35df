"""Replay reads: a recording read in ingestion's one-second windows against one whole read.

    python bench/bench_replay.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from market.sources.events import PairRef  # noqa: E402
from market.sources.replay import ReplaySource, write_jsonl  # noqa: E402
from market.sources.venues import binance_recording_events  # noqa: E402

PAIR = PairRef("binance", "BTC", "USDT")
RECORDING = ROOT / "data/realdata/binance-spot/btcusdt_20240808.gz"


def run() -> list[dict]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "btcusdt.jsonl.gz"
        write_jsonl(sorted(binance_recording_events(RECORDING, "BTCUSDT"), key=lambda e: e.ts_ms), PAIR, path)
        source = ReplaySource(path)
        first, last = source.earliest_ms(PAIR), source.latest_ms(PAIR)
        started = time.perf_counter()
        whole = sum(1 for _ in source.events(PAIR, first, last + 1))
        whole_s = time.perf_counter() - started
        source = ReplaySource(path)
        source.earliest_ms(PAIR)  # the index, built once, is not part of the windows' cost
        started = time.perf_counter()
        windows = 0
        for start in range(first - first % 1000, last + 1, 1000):
            windows += sum(1 for _ in source.events(PAIR, start, start + 1000))
        windows_s = time.perf_counter() - started
    assert windows == whole
    per_s = windows / windows_s
    return [{
        "figure": f"Replay of the recorded BTCUSDT ({whole:,} events, gzip) in 1-second windows: events/s",
        "value": f"{per_s:,.0f}",
        "comparison": f"one whole read: {whole / whole_s:,.0f} events/s",
        "goal": "within 2x of a whole read", "met": per_s * 2 >= whole / whole_s,
    }]


if __name__ == "__main__":
    for row in run():
        print(row)
