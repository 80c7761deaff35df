"""Answers a process reuses for a bounded time instead of asking the database again."""

from __future__ import annotations

import threading
import time
from typing import Callable

from django.conf import settings


class RecentLookups:
    """Each answer is kept for the number of seconds in the named setting: the most an edit
    takes to reach every process, with no message between them; 0 turns it off. Values
    are shared by the requests and threads of the process: read them, never change them."""

    MAX_ENTRIES = 100_000  # keys come from requests (typos included): bound the memory

    def __init__(self, seconds_setting: str, *, max_entries: int = MAX_ENTRIES, size: Callable | None = None):
        """`size`: what an answer counts for against max_entries (default 1 each), for
        answers whose sizes differ widely."""
        self.seconds_setting = seconds_setting
        self.max_entries = max_entries
        self._size = size
        self._held = 0
        self._lock = threading.Lock()  # the count of what is held
        self._entries: dict[tuple, tuple[float, object]] = {}

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._held = 0

    def fresh(self, key: tuple, missing=None):
        """The answer kept for `key` if it is still within its time, else `missing`; never
        loads (for code on the event loop, which must not wait on the database)."""
        entry = self._entries.get(key)
        if entry is None or time.monotonic() - entry[0] >= getattr(settings, self.seconds_setting):
            return missing
        return entry[1]

    def get(self, key: tuple, load: Callable[[], object]):
        seconds = getattr(settings, self.seconds_setting)
        now = time.monotonic()
        entry = self._entries.get(key)
        if entry is not None:
            if now - entry[0] < seconds:
                return entry[1]
            # one request reloads an expired answer; the others keep the old one meanwhile
            # instead of all asking the database at once (a few dozen in flight each second)
            self._entries[key] = (now, entry[1])
        try:
            value = load()
        except BaseException:
            if entry is not None:
                self._entries[key] = entry
            raise
        self._keep(key, now, value, seconds)
        return value

    def put(self, key: tuple, value) -> None:
        """Keep `value` as the answer for `key` from now (for code on the event loop, which
        loads its own way)."""
        self._keep(key, time.monotonic(), value, getattr(settings, self.seconds_setting))

    def _keep(self, key: tuple, now: float, value, seconds: float) -> None:
        if seconds <= 0:
            return
        size = 1 if self._size is None else self._size(value)
        with self._lock:
            old = self._entries.get(key)
            if old is not None:
                self._held -= 1 if self._size is None else self._size(old[1])
            if self._held + size > self.max_entries:
                self._entries.clear()
                self._held = 0
            if size <= self.max_entries:
                self._entries[key] = (now, value)
                self._held += size
