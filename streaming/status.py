"""The derived stream state (SPEC.md 3), a pure function of the raw signals.

    no heartbeat yet                          REQUESTED
    heartbeat fresh, coverage_24h < ready      WARMING
    heartbeat fresh, coverage_24h >= ready     READY
    heartbeat older than stale_after           STALE
    heartbeat older than failed_after, or a
    fatal source error                         FAILED

The overall state of a pair is the worst state of its subscribed metrics (of all metrics
when none is subscribed)."""

from __future__ import annotations

from dataclasses import dataclass

REQUESTED, WARMING, READY, STALE, FAILED = "REQUESTED", "WARMING", "READY", "STALE", "FAILED"
SEVERITY = {READY: 0, WARMING: 1, REQUESTED: 2, STALE: 3, FAILED: 4}


@dataclass(frozen=True)
class Thresholds:
    ready_coverage: float = 0.95
    stale_after_ms: int = 30_000
    failed_after_ms: int = 600_000


def derive_state(*, heartbeat_age_ms: int | None, coverage: float, fatal: bool,
                 thresholds: Thresholds = Thresholds()) -> str:
    if fatal:
        return FAILED
    if heartbeat_age_ms is None:
        return REQUESTED
    if heartbeat_age_ms > thresholds.failed_after_ms:
        return FAILED
    if heartbeat_age_ms > thresholds.stale_after_ms:
        return STALE
    return READY if coverage >= thresholds.ready_coverage else WARMING


def worst(states) -> str:
    return max(states, key=SEVERITY.__getitem__, default=REQUESTED)
