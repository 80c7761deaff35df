"""A second, independent labelled market for judging spoofing detectors. Plain Python.

What it generates: for any pair and any window, a time-ordered feed of `Trade`,
`BookSnapshot` and `BookDelta` events (market/sources/events.py) from a simulated limit
order book with busy background flow (a fair value that random-walks with trend regimes
and answers book imbalance, limit adds, cancels, market makers re-quoting several levels at
once, takers at the touch), into which it injects spoofing episodes of the three schemes
and legitimate look-alikes (hard negatives), with labels (`Episode`) that say what was
done, when, where, and with which parameters.

It was written from DETECTION.md (the detection contract: scheme definitions and starting thresholds)
alone, without reading the service's own simulator or its detectors, so the two cannot
share a blind spot by construction.

Use:

    src = SecondMarketSource(seed=7, episodes_per_hour=12.0, hard_negatives=True)
    for ev in src.events(pair, start_ms, end_ms): ...
    labels = src.episodes_between(pair, start_ms, end_ms)

Pair classes (profiles.py): a base of BTC/XBT/WBTC/TBTC is "sparse", a base among the
common sub-dollar coins (DOGE, XRP, ADA, ...) is "dense", any other base takes the parity of
a SHA-256 of its symbol.
- sparse: tick 0.1, price around 60,000 (each pair its own level within +-20 %), 50 levels
  a side shown, gaps between occupied levels irregular (1 to ~100 ticks, typically 5-30).
- dense: tick 0.0001, price around 0.5, nearly every tick near the touch occupied, only the
  top 25 levels a side shown: a level that leaves the window is sent as qty 0 and comes
  back when it re-enters (that is scrolling, not a cancel).

How DETECTION.md's thresholds were read ("large" = at least max(5 x median level size at
that distance, 15 % of top-20 depth); sizes are drawn as size_factor x that bound):

| scheme | parameter | DETECTION.md | clear episodes draw | near miss draws |
|---|---|---|---|---|
| layering | n_levels | >= 3 large levels | 3-7 | 2 |
| layering | build_ms | within 3 s | 0.1-3 s | 4-9 s |
| layering | behind_ticks | >= 2 levels 1-25 ticks behind | 2 at 1-25 ticks, the rest 1-25 ticks or the 1st-5th visible level behind | 1 at 1-25, the rest 26-60 |
| layering | size_factor | large add | 1.1-3.0 | 0.35-0.85 |
| layering | removed_fraction | >= 70 % removed | 0.70-1.0 (60-100 % of it in one <= 1 s cluster) | 0.30-0.62 |
| layering | collapse_window | within 60 s | pull 0.5-45 s after the build, all done by 60 s | pull starts 62-120 s after |
| flipping | touch_distance | 0-2 ticks | 0-2 | 3-8 |
| flipping | size_factor | large add | 1.1-3.0, in 2-3 child orders | 0.35-0.85 |
| flipping | life_ms | <= 10 s | 0.3-9.5 s | 11-30 s |
| flipping | cancel_fraction | >= 80 % cancelled | 0.80-1.0 | 0.40-0.72 |
| flipping | flip_latency_ms | within 1 s | 0-1 s (pull + flip all inside 1 s) | 1.3-4 s |
| flipping | flip_size | aggressive >= max(20 % size, 3 x taker second) or mirror >= 50 % | 1.1-2.5 x that / mirror 0.55-1.5 | 0.3-0.8 x / mirror 0.15-0.42 |
| vacuuming | depth_ratio | top-10 >= 1.5 x baseline | 1.5-4.0 | 1.1-1.4 |
| vacuuming | rest_ms | resting >= 2 s | 2-12 s | 0.3-1.8 s |
| vacuuming | pull_ms | >= 50 % removed within 1 s | 0.02-1 s | 1.5-4 s |
| vacuuming | removed_fraction | >= 50 % removed | 0.5-1.0 of what was added | 0.2-0.45 |
| vacuuming | executed | <= 20 % executed | none scripted | a sweep fills 30-60 % first |
| vacuuming | other_side | other side fell < 20 % | untouched | 25-50 % of its top 10 cancelled |
| vacuuming | mid move | >= max(1 tick, 0.5 sigma) into the gap in 5 s | 1-3 x that, 0.05-3.5 s after the pull | (not drawn: background can move it anyway) |

Readings of what DETECTION.md leaves open: layering's "within 60 s" is counted from the
last add (a pull that starts later is the near miss; patient orders cancelled after
minutes are a hard negative); vacuuming's ">= 50 % removed" is a share of the depth the
episode added (`ratio_at_pull` records the side's top-10 depth over its baseline when the
pull began); a flipping add is one large order at one price sent as 2-3 child orders
20-300 ms apart; the flip's 1 s runs from the cancel and the draw keeps pull and flip
inside 1 s of the first cancel, so either reading holds.

Baselines are the generator's own: median visible level size in the distance bucket
(0-2, 3-10, 11-25, 26+ ticks), top-20 depth and the median of one-per-second top-10
depth samples over the last 30 minutes, at the moment the episode starts.

A spoofer reacts like one: layers whose price the touch reaches (or that takers start to
fill) are pulled at once, a flipping order that gets more than 5 % filled is pulled
early, and vacuuming depth the price carried out of the top 10 is re-pegged into it; what
still rested at the pull is `resting_at_pull`. Labels are built from what the
scripts did: `parameters["orders"]` lists every child order with price, quantity, times,
filled and cancelled quantity (and what was filled by the last pull action), distance in
ticks and in visible levels, and the large-add bound it was sized against;
`parameters["pulls"]` every pull action (ms, quantity cancelled, quantity of the episode's
orders executed by then); each scheme adds what it measured as it acted (layering:
`pull_after_last_add_ms`; flipping: `large_qty`, `flip_trades` or `mirror_ms`; vacuuming:
`ratio_at_pull`, `stood_ms_at_pull`, the other side's top-10 depth at the pull's start and
last action, `mid_move_ticks` against `move_bound_ticks` at `move_ms`). Recording takes no
draw and sends no event: a seed's feed is what it was before any of it.

So the reactive spoofer and the background flow can make an episode drawn clear not happen
as one. `disrupted(pair, episode)` judges it (judge.py): None when the episode, as it
happened, is inside every threshold of DETECTION.md's table; otherwise the thresholds it
broke, each "<threshold> (<as happened>)", e.g. "executed > 10 % (25 %)" for layers that
takers filled. It reads only the record, never the draw, with one rule for every episode
(layering: <= 10 % executed by the pull's end, >= 3 large levels within 3 s with >= 2 of them
1-25 ticks behind the touch when placed, >= 70 % removed within 60 s of the last layer, the
pull mostly in one 1 s cluster; flipping: every child 0-2 ticks from the touch when placed,
at least the large bound, life <= 10 s, >= 80 % cancelled, the aggressive trades or the mirror
of DETECTION.md's size within 1 s of the first cancel; vacuuming: top-10 depth >= 1.5 x
baseline at the pull, standing there >= 2 s unbroken, >= 50 % of the added depth removed
within 1 s, <= 20 % executed, the other side's top-10 down < 20 % during the pull, the mid
moved >= max(1 tick, 0.5 sigma) into the gap within 5 s). Near misses and hard negatives are
not judged (None). schemes/evaluation.py keeps disrupted episodes out of recall.

Hard negatives (scheme None): following_ladder, iceberg, quote_refresh, filled_wall,
far_patient (cancelled after minutes), two_sided_pull (side "both"), sweep, scroll_out
(see negatives.py).
"""

from .episodes import Episode
from .source import SecondMarketSource

__all__ = ["Episode", "SecondMarketSource"]
