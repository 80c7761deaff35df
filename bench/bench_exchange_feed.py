"""Real recorded exchange traffic through the live path on one core: the venue codec
(Binance's raw frames, the exact book sync), the bar builder and the scheme detectors.

    python bench/bench_exchange_feed.py
"""

from __future__ import annotations

import gzip
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from market.sources.bar_builder import BarBuilder  # noqa: E402
from market.sources.events import BookDelta, BookSnapshot, PairRef  # noqa: E402
from market.sources.venues import binance_recording_events  # noqa: E402
from schemes.detectors import DetectorEngine  # noqa: E402

RECORDINGS = {"BTCUSDT": ROOT / "data/realdata/binance-spot/btcusdt_20240808.gz",
              "ETHUSDT": ROOT / "data/realdata/binance-spot/ethusdt_20240808.gz"}


def measure(symbol: str, path: Path) -> dict:
    pair = PairRef("binance", symbol[:-4], symbol[-4:])
    with gzip.open(path, "rt") as fh:
        lines = fh.read().splitlines()
    span_s = (int(lines[-1].split(" ", 1)[0]) - int(lines[0].split(" ", 1)[0])) / 1e9
    started = time.perf_counter()
    events = sorted(binance_recording_events(lines, symbol), key=lambda e: e.ts_ms)  # as ingestion reads them
    decode_s = time.perf_counter() - started
    builder, engine = BarBuilder(pair), DetectorEngine(pair, batch_ms=100)  # Binance's @depth@100ms
    started = time.perf_counter()
    for event in events:
        builder.feed(event)
    builder.flush(events[-1].ts_ms + 1000)
    bars_s = time.perf_counter() - started
    started = time.perf_counter()
    found = engine.feed_many(events)
    detect_s = time.perf_counter() - started
    updates = sum(len(e.bids) + len(e.asks) for e in events if type(e) in (BookDelta, BookSnapshot))
    total_s = decode_s + bars_s + detect_s
    return {"symbol": symbol, "messages": len(lines), "events": len(events), "updates": updates,
            "span_s": span_s, "total_s": total_s, "decode_s": decode_s, "bars_s": bars_s, "detect_s": detect_s,
            "found": len(found)}


def run() -> list[dict]:
    rows = []
    for symbol, path in RECORDINGS.items():
        m = measure(symbol, path)
        per_s = m["messages"] / m["total_s"]
        live_rate = m["messages"] / m["span_s"]
        rows.append({
            "figure": f"Recorded Binance {symbol} ({m['messages']:,} raw messages, {m['span_s']:.0f} s): "
                      "raw messages/s through codec + bars + detectors, 1 core",
            "value": f"{per_s:,.0f}",
            "comparison": f"the pair sent {live_rate:.0f}/s live (x{per_s / live_rate:,.0f}); "
                          f"{m['events'] / m['total_s']:,.0f} events/s, {m['updates'] / m['detect_s']:,.0f} book "
                          f"level updates/s in the detectors; split codec {m['decode_s']:.2f} s, bars "
                          f"{m['bars_s']:.2f} s, detectors {m['detect_s']:.2f} s",
            "goal": ">= 20,000 book updates/s per core in the detectors",
            "met": m["updates"] / m["detect_s"] >= 20_000,
        })
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
