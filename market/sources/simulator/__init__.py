"""A deterministic market simulator: the offline source of events and labelled spoofing
episodes. Plain Python, no Django.

Determinism. Everything is a pure function of (seed, pair, time):

* The fair mid is a sum of value-noise octaves on log price (periods 20 s .. 243 days,
  amplitudes scaled like a random walk, the short ones multiplied by a slowly varying
  volatility regime), evaluated at any t without iterating from an origin. An asset's
  USD log price is beta * market factor + its own path, so pairs of one asset on
  several exchanges / quote currencies agree (ETH-BTC = ETH-USD / BTC-USD), plus a small
  exchange-specific basis.
* Events are generated in 1-minute blocks. A block is seeded by blake2b(seed, exchange,
  base, quote, minute) and starts with a BookSnapshot at the minute start (a resync: the
  book drawn fresh around the fair mid, so detectors must treat a snapshot as a reset,
  not as cancels), then BookDeltas, Trades and Quotes inside the minute. `events(pair, a,
  c)` filters the blocks to the window, so [a, c) == [a, b) + [b, c) for any b.
* Episodes (labels) are drawn per minute from their own hash, so `episodes_between`
  needs no event generation. Episodes stay inside their minute, except the hard negative
  "patient_far" (a far order resting for minutes), which later blocks know about.

Flow inside a minute: Poisson limit-order arrivals (biased to the touch, on a price grid
that is one tick wide near the touch and coarser away from it, ~20-50 levels a side
within 1.5 % of mid), cancels, market orders walking the book (one Trade per level
touched, taker side), and "informed" flow: when the fair price moves through resting
orders they are mostly cancelled, partly taken. Traders react to the top-10 imbalance
(market-order side probability) and signed flow and imbalance move an impact term that
shifts the reference price, so pressure moves price a little; the impact fades out
before the minute ends so blocks stay independent. Activity follows a daily cycle
(busiest 13:00-21:00 UTC), weekends are quieter.

`synthesize_bars` produces hour/day/minute Bars from the same mid path without
generating events (for seeding long histories).

Modules: `flow` (the price path), `profiles` (a pair's book profile), `block` (one minute:
the price its traders see and the event loop), `book` (the minute's order book: its state,
the operations that change it and the events it reports), the flows that act on the book
through that interface: `order_flow` (limit orders, cancels, market orders, the crowd of
small takers), `informed` (orders run over by the price, market makers following the
touch), `ladders` (market makers re-quoting ladders) and `episodes` (labels: schemes, near
misses, hard negatives, and their actions), then `bars` (synthesized bars) and `source`
(SimulatorSource, which ties them together).
"""

from .episodes import HARD_NEGATIVES, NEAR_MISS_SHARE, SCHEMES, Episode
from .flow import stable_hash
from .source import SimulatorSource

__all__ = ["HARD_NEGATIVES", "NEAR_MISS_SHARE", "SCHEMES", "Episode", "SimulatorSource", "stable_hash"]
