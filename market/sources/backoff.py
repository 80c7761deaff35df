"""The reconnect backoff of the live sources, on tenacity. Plain Python (no Django).

`backoff_wait(base, cap, jitter, rng)`: before retry n (n consecutive failures),
min(cap, base * 2**(n-1)) seconds, shortened by up to `jitter` of it at random so many
workers do not reconnect in step. tenacity's own jittered waits add to the delay
(`wait_exponential_jitter`) or draw it whole at random (`wait_random_exponential`); ours
only ever shortens it, so `cap` stays the longest wait."""

from __future__ import annotations

import random

from tenacity import RetryCallState, wait_exponential
from tenacity.wait import wait_base


class _Shortened(wait_base):
    def __init__(self, inner: wait_base, jitter: float, rng: random.Random | None):
        self.inner, self.jitter, self.rng = inner, jitter, rng

    def __call__(self, retry_state: RetryCallState) -> float:
        delay = self.inner(retry_state)
        if self.jitter:
            delay *= 1 - (self.rng or random).random() * self.jitter
        return delay


def backoff_wait(base: float, cap: float, jitter: float = 0.0, rng: random.Random | None = None) -> wait_base:
    return _Shortened(wait_exponential(multiplier=base, max=cap), jitter, rng)
