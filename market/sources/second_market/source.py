"""The source: hours simulated on demand, windows cut from them. Plain Python.

Each hour [h x 3600 s, (h + 1) x 3600 s) is a pure function of (seed, pair, h): it starts
from a warmed-up book around that hour's anchor price and opens with a BookSnapshot. A
window that starts anywhere else opens with a BookSnapshot of the visible book as the
events before it left it; so [a, c) equals [a, b) followed by [b, c) exactly when b is an
hour boundary, and otherwise up to that one opening snapshot (which equals the book the
earlier events build)."""

from __future__ import annotations

import random
from bisect import bisect_left
from collections import OrderedDict
from typing import Iterator

from ..events import BookDelta, BookSnapshot, Event, PairRef
from .episodes import Episode, Record, plan_hour
from .flow import HOUR_MS, Sim
from .judge import broken_thresholds, completed_ms
from .negatives import SCRIPTS as NEGATIVE_SCRIPTS, draw_negative
from .profiles import anchor_price, pair_class, profile_for, stream_seed
from .schemes import SCRIPTS as SCHEME_SCRIPTS

_CACHED_HOURS = 3


class _Hour:
    __slots__ = ("events", "times", "episodes", "replay")

    def __init__(self, events: list, episodes: list):
        self.events = events
        self.times = [e.ts_ms for e in events]
        self.episodes = episodes
        self.replay = (0, {}, {})  # (next index, bids, asks): windows usually move forward


class SecondMarketSource:
    name = "second_market"

    def __init__(self, seed: int = 0, episodes_per_hour: float = 12.0, *, hard_negatives: bool | float = True):
        self.seed = int(seed)
        self.rate = float(episodes_per_hour)
        if hard_negatives is True:
            self.negative_rate = self.rate
        elif hard_negatives is False:
            self.negative_rate = 0.0
        else:
            self.negative_rate = float(hard_negatives)
        self._hours: OrderedDict = OrderedDict()

    # --- the pair ------------------------------------------------------------------
    def tick_size(self, pair: PairRef) -> float:
        return profile_for(pair).tick

    def pair_class(self, pair: PairRef) -> str:
        return pair_class(pair)

    def earliest_ms(self, pair: PairRef) -> int | None:
        return None

    # --- hours ---------------------------------------------------------------------
    def _hour(self, pair: PairRef, hour: int) -> _Hour:
        key = (pair, hour)
        got = self._hours.get(key)
        if got is not None:
            self._hours.move_to_end(key)
            return got
        got = self._generate(pair, hour)
        self._hours[key] = got
        while len(self._hours) > _CACHED_HOURS:
            self._hours.popitem(last=False)
        return got

    def _generate(self, pair: PairRef, hour: int) -> _Hour:
        prof = profile_for(pair)
        start = hour * HOUR_MS
        sim = Sim(prof, random.Random(stream_seed(self.seed, pair, hour, "flow")), start,
                  anchor_price(prof, self.seed, pair, hour), anchor_price(prof, self.seed, pair, hour + 1),
                  f"{pair.base}{pair.quote}-{hour}-")
        # separate streams: switching negatives off leaves the spoofing plan as it was
        plan = plan_hour(random.Random(stream_seed(self.seed, pair, hour, "spoof")),
                         random.Random(stream_seed(self.seed, pair, hour, "negatives")),
                         self.rate, self.negative_rate, HOUR_MS, draw_negative)
        records = []
        for offset, scheme, kind, side, params in plan:
            rec = Record(scheme, kind, side, params, pair)
            script = SCHEME_SCRIPTS[scheme] if scheme else NEGATIVE_SCRIPTS[kind]
            sim.schedule(start + offset, lambda ms, rec=rec, script=script: script(sim, rec, ms))
            records.append(rec)
        events = sim.run()
        episodes = [ep for ep in (rec.episode(sim.book) for rec in records) if ep is not None]
        return _Hour(events, episodes)

    def _book_before(self, h: _Hour, index: int) -> tuple[dict, dict]:
        i, bids, asks = h.replay
        if index < i:
            i, bids, asks = 0, {}, {}
        else:
            bids, asks = dict(bids), dict(asks)
        for ev in h.events[i:index]:
            if type(ev) is BookDelta:
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
            elif type(ev) is BookSnapshot:
                bids, asks = dict(ev.bids), dict(ev.asks)
        h.replay = (index, bids, asks)
        return bids, asks

    # --- the feed ------------------------------------------------------------------
    def events(self, pair: PairRef, start_ms: int, end_ms: int) -> Iterator[Event]:
        if end_ms <= start_ms:
            return
        for hour in range(start_ms // HOUR_MS, (end_ms - 1) // HOUR_MS + 1):
            h = self._hour(pair, hour)
            lo = bisect_left(h.times, start_ms)
            hi = bisect_left(h.times, end_ms)
            if lo > 0 and hour == start_ms // HOUR_MS:
                bids, asks = self._book_before(h, lo)
                yield BookSnapshot(start_ms, tuple(sorted(bids.items(), reverse=True)), tuple(sorted(asks.items())))
            yield from h.events[lo:hi]

    def episodes_between(self, pair: PairRef, start_ms: int, end_ms: int) -> list[Episode]:
        """The episodes that start and end inside [start_ms, end_ms), in time order."""
        out = []
        if end_ms <= start_ms:
            return out
        for hour in range(start_ms // HOUR_MS, (end_ms - 1) // HOUR_MS + 1):
            out.extend(ep for ep in self._hour(pair, hour).episodes if start_ms <= ep.start_ms and ep.end_ms < end_ms)
        return out

    def resting_at_pull(self, pair: PairRef, ep: Episode) -> float | None:
        if ep.scheme is None:
            return None
        share = ep.parameters.get("resting_at_pull")
        return None if share is None else round(share, 6)

    def disrupted(self, pair: PairRef, ep: Episode) -> str | None:
        """None when a clear episode happened as a clear case; otherwise the DETECTION.md
        thresholds it broke as it happened, "; "-joined, each "<threshold> (<as happened>)"
        (judge.py). Near misses and hard negatives are not judged: None."""
        reasons = broken_thresholds(ep)
        return "; ".join(reasons) if reasons else None

    def completed_ms(self, pair: PairRef, ep: Episode) -> int | None:
        """When the episode, as it happened, became a whole case of DETECTION.md's table (judge.py;
        None if it never did): the instant a detection's latency counts from."""
        return completed_ms(ep)
