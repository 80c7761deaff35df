"""Per-message cost of the reconnecting watch loop of market/sources/exchange.py (the loop
every ccxt message goes through), with no I/O: a watch that answers at once, a no-op handler.

    python bench/bench_retry_loops.py"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from market.sources.exchange import ExchangeSource  # noqa: E402

N = 200_000


async def one_run() -> float:
    source = ExchangeSource("binance", client_factory=lambda: None)
    left = N

    async def watch():
        nonlocal left
        left -= 1
        if left <= 0:
            source._closed = True
        return left

    async def handle(message):
        return None

    started = time.perf_counter()
    await source._channel("trades", "BTC/USDT", watch, handle)
    return (time.perf_counter() - started) / N * 1e9


def main() -> None:
    best = min(asyncio.run(one_run()) for _ in range(5))
    print(f"exchange watch loop: {best:.0f} ns per message (best of 5 x {N})")


if __name__ == "__main__":
    main()
