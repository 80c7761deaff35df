"""Benchmark: our TOON encoder against JSON encoders and the official package.

Run from the repository root:  python bench/bench_toon.py

Builds one day of one-second candlesticks (86,400 rows) inside the series meta
envelope and times, in one run (best of 5, ``time.perf_counter``):
``toon.encode``, stdlib ``json.dumps`` (compact separators),
``orjson.dumps`` and ``toon_format.encode``, and compares the TOON body size
with compact JSON.  ``run()`` returns the figures as rows
``{"figure", "value", "comparison", "goal", "met"}`` for ``make bench``
(``met`` is a bool for goal rows and None for informative ones).
"""

from __future__ import annotations

import gc
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from toon import encoder as toon  # noqa: E402

ROWS = 86_400
REPEAT = 5


def build_response(rows: int = ROWS, seed: int = 20240301) -> dict:
    """A candlestick series response: meta envelope plus ``rows`` one-second bars."""
    rng = random.Random(seed)
    price = 43_123.57
    data = []
    for second in range(rows):
        hour, minute, sec = second // 3600 % 24, second // 60 % 60, second % 60
        open_ = round(price, 2)
        close = round(max(1.0, open_ + rng.gauss(0.0, 4.0)), 2)
        high = round(max(open_, close) + abs(rng.gauss(0.0, 2.0)), 2)
        low = round(min(open_, close) - abs(rng.gauss(0.0, 2.0)), 2)
        count = rng.randint(1, 180)
        mean = (open_ + high + low + close) / 4
        data.append(
            {
                "date": f"2024-03-01T{hour:02d}:{minute:02d}:{sec:02d}Z",
                "open": open_,
                "high": high,
                "low": low,
                "close": close,
                "observation_count": count,
                "price_sum": round(mean * count, 2),
                "price_variance": round(abs(rng.gauss(0.0, 3.0)) ** 2, 6),
            }
        )
        price = close
    return {
        "meta": {
            "source_type": "exchange",
            "source": "binance",
            "symbol": "BTC-USDT",
            "metric_type": "candlestick",
            "sides": ["ohlc"],
            "resolution": "1s",
            "start": "2024-03-01T00:00:00Z",
            "end": "2024-03-02T00:00:00Z",
            "count": rows,
        },
        "data": data,
    }


def _best(func, repeat: int = REPEAT) -> float:
    """Best wall time of ``repeat`` calls, in seconds (GC paused, as timeit does)."""
    return _best_of({"f": func}, repeat)["f"]


def _best_of(funcs: dict, repeat: int = REPEAT) -> dict:
    """Best wall time of each function over ``repeat`` rounds; the functions
    take turns within a round, so load changes hit them alike."""
    best = dict.fromkeys(funcs, float("inf"))
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeat):
            for name, func in funcs.items():
                start = time.perf_counter()
                func()
                best[name] = min(best[name], time.perf_counter() - start)
    finally:
        if enabled:
            gc.enable()
    return best


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def run(rows: int = ROWS, repeat: int = REPEAT) -> list[dict]:
    """Time the encoders once each (best of ``repeat``) and return the figure rows."""
    doc = build_response(rows)
    ours = toon.encode(doc)
    compact = json.dumps(doc, separators=(",", ":"))

    timed = _best_of(
        {
            "ours": lambda: toon.encode(doc),
            "json": lambda: json.dumps(doc, separators=(",", ":")),
        },
        repeat,
    )
    t_ours, t_json = timed["ours"], timed["json"]

    saved = toon._orjson
    toon._orjson = None  # the pure-Python number path
    try:
        if toon.encode(doc) != ours:
            raise AssertionError("pure-Python path differs from the accelerated path")
        t_pure = _best(lambda: toon.encode(doc), repeat)
    finally:
        toon._orjson = saved

    try:
        import orjson
    except ImportError:  # pragma: no cover
        orjson = None
    t_orjson = _best(lambda: orjson.dumps(doc), repeat) if orjson else None

    try:
        import toon_format
    except ImportError:  # pragma: no cover
        toon_format = None
    t_official = None
    if toon_format is not None:
        if toon_format.decode(ours) != doc:
            raise AssertionError("toon_format.decode(our body) != the response")
        t_official = _best(lambda: toon_format.encode(doc), min(repeat, 2))

    toon_bytes = len(ours.encode("utf-8"))
    json_bytes = len(compact.encode("utf-8"))
    ratio = toon_bytes / json_bytes

    label = f"{rows:,} candle rows"
    result = [
        {
            "figure": f"TOON encode, ours ({label})",
            "value": _ms(t_ours),
            "comparison": f"{t_ours / t_json:.2f}x stdlib json.dumps ({_ms(t_json)})",
            "goal": "<= stdlib json.dumps time",
            "met": t_ours <= t_json,
        },
        {
            "figure": "TOON encode, ours, pure-Python numbers (no orjson)",
            "value": _ms(t_pure),
            "comparison": f"{t_pure / t_json:.2f}x stdlib json.dumps",
            "goal": "",
            "met": None,
        },
        {
            "figure": "stdlib json.dumps, compact separators",
            "value": _ms(t_json),
            "comparison": "baseline",
            "goal": "",
            "met": None,
        },
    ]
    if t_orjson is not None:
        result.append(
            {
                "figure": "orjson.dumps",
                "value": _ms(t_orjson),
                "comparison": f"ours is {t_ours / t_orjson:.1f}x orjson",
                "goal": "",
                "met": None,
            }
        )
    if t_official is not None:
        result.append(
            {
                "figure": f"toon_format.encode {getattr(toon_format, '__version__', '')}".strip(),
                "value": _ms(t_official),
                "comparison": f"ours is {t_official / t_ours:.1f}x faster",
                "goal": "",
                "met": None,
            }
        )
    result.append(
        {
            "figure": "TOON body size vs compact JSON",
            "value": f"{toon_bytes:,} B vs {json_bytes:,} B",
            "comparison": f"{ratio:.1%} of compact JSON",
            "goal": "<= 60 % of compact JSON",
            "met": ratio <= 0.60,
        }
    )
    return result


def markdown(rows: list[dict]) -> str:
    lines = ["| figure | value | comparison (same run) | goal | met |", "| --- | --- | --- | --- | --- |"]
    for row in rows:
        met = {True: "yes", False: "**no**"}.get(row.get("met"), "")
        lines.append(f"| {row['figure']} | {row['value']} | {row['comparison']} | {row['goal']} | {met} |")
    return "\n".join(lines)


def main() -> int:
    print(f"Python {sys.version.split()[0]}, best of {REPEAT}")
    print(markdown(run()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
