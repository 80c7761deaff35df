"""Which source feeds a pair: the exchange's configured source, built once per process."""

from __future__ import annotations

from functools import lru_cache

from django.conf import settings

from market.models import Exchange, Pair
from market.sources.events import PairRef


def pair_ref(pair: Pair) -> PairRef:
    return PairRef(pair.exchange.slug, pair.base.symbol, pair.quote.symbol)


@lru_cache(maxsize=64)
def _source(kind: str, seed: int, ccxt_id: str, replay_path: str, loop_from_ms: int | None = None):
    if kind == Exchange.Source.SIMULATOR:
        from market.sources.simulator import SimulatorSource

        return SimulatorSource(seed=seed, episodes_per_hour=settings.SIMULATOR_EPISODES_PER_HOUR)
    if kind == Exchange.Source.REPLAY:
        from market.sources.replay import LoopedReplay, ReplaySource

        recording = ReplaySource(replay_path)
        return recording if loop_from_ms is None else LoopedReplay(recording, loop_from_ms)
    from .feeds import LiveExchangeSource

    return LiveExchangeSource(ccxt_id)


def source_for(pair: Pair):
    exchange = pair.exchange
    return _source(exchange.source, settings.SIMULATOR_SEED, exchange.ccxt_id, exchange.replay_path,
                   exchange.replay_loop_from_ms)
