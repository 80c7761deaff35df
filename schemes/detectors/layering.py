"""Layering: several large orders placed on one side behind the touch within a few
seconds, then cancelled (mostly unexecuted) together. Plain Python; driven by
`DetectorEngine`."""

from __future__ import annotations

LAYER_MIN_LEVELS = 2  # distinct prices with a large add that was pulled
LAYER_MIN_DIST_SCALED = 0.5  # layers stand >= 1 scaled tick behind the touch ...
LAYER_MAX_DIST_SCALED = 40.0  # ... and not further than this
LAYER_BUILD_MS = 6_000  # the layers were added within this span
LAYER_PULL_MS = 3_000  # and pulled within this span
LAYER_MAX_HOLD_MS = 40_000
LAYER_MAX_EXECUTED = 0.3


class LayeringDetector:
    def reset(self) -> None:
        pass

    def on_pulled(self, eng, rec, ts: int) -> list:
        if rec.used or not (LAYER_MIN_DIST_SCALED <= rec.dist_scaled <= LAYER_MAX_DIST_SCALED):
            return []
        if rec.executed > LAYER_MAX_EXECUTED * rec.qty or ts - rec.t_add > LAYER_MAX_HOLD_MS:
            return []
        cluster = []
        prices = set()
        same_price_adds = 0
        for r in eng.records[rec.side]:
            if r.used or abs(r.t_add - rec.t_add) > LAYER_BUILD_MS:
                continue
            if r.price in prices:
                same_price_adds += 1
            if r.t_pulled is None or ts - r.t_pulled > LAYER_PULL_MS:
                continue
            if not (LAYER_MIN_DIST_SCALED <= r.dist_scaled <= LAYER_MAX_DIST_SCALED):
                continue
            if r.executed > LAYER_MAX_EXECUTED * r.qty:
                continue
            if r.price in prices:
                continue
            prices.add(r.price)
            cluster.append(r)
        if len(cluster) < LAYER_MIN_LEVELS:
            return []
        other = "ask" if rec.side == "bid" else "bid"
        if sum(1 for r in eng.records[other] if r.t_pulled is not None and ts - r.t_pulled <= LAYER_PULL_MS) >= 2:
            return []  # both sides pulled together: a two-sided withdrawal
        for r in eng.records[rec.side]:
            if abs(r.t_add - rec.t_add) <= LAYER_BUILD_MS:
                r.used = True  # the rest of the layers belong to this event
        qty = sum(r.qty for r in cluster)
        canc = sum(r.cancelled for r in cluster)
        size_ratio = sum(r.size_ratio * r.qty for r in cluster) / qty if qty else 0.0
        best = min(cluster, key=lambda r: r.dist_ticks)
        return [eng.make_event(
            "layering", rec.side, ts, best.price, cluster,
            t_collapse=min(r.t_pulled for r in cluster), t_collapse_end=ts,
            features={"size_ratio": size_ratio, "cancel_ratio": canc / qty if qty else 0.0,
                      "levels": len(cluster)})]
