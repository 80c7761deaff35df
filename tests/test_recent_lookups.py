"""config.recent.RecentLookups: answers a process reuses for a bounded time."""

import threading

import pytest

from config.recent import RecentLookups


@pytest.fixture
def lookups(settings, monkeypatch):
    settings.TEST_RECENT_SECONDS = 1.0
    clock = [100.0]
    monkeypatch.setattr("config.recent.time.monotonic", lambda: clock[0])
    return RecentLookups("TEST_RECENT_SECONDS"), clock


def test_an_expired_answer_is_reloaded_by_one_request_while_the_others_keep_the_old_one(lookups):
    recent, clock = lookups
    assert recent.get(("k",), lambda: "old") == "old"
    clock[0] += 1.5
    loading, release, loads = threading.Event(), threading.Event(), []

    def slow_load():
        loads.append(1)
        loading.set()
        release.wait(5)
        return "new"

    reloader = threading.Thread(target=lambda: recent.get(("k",), slow_load))
    reloader.start()
    assert loading.wait(5)
    assert recent.get(("k",), lambda: loads.append(1) or "other") == "old"
    release.set()
    reloader.join(5)
    assert loads == [1]
    assert recent.get(("k",), lambda: "other") == "new"


def test_a_failed_reload_leaves_the_answer_expired_so_the_next_request_asks_again(lookups):
    recent, clock = lookups
    recent.get(("k",), lambda: "old")
    clock[0] += 1.5

    def failing():
        raise RuntimeError("database down")

    with pytest.raises(RuntimeError):
        recent.get(("k",), failing)
    assert recent.get(("k",), lambda: "new") == "new"


def test_answers_are_not_kept_when_the_setting_is_zero(settings):
    settings.TEST_RECENT_SECONDS = 0
    recent, calls = RecentLookups("TEST_RECENT_SECONDS"), []
    for _ in range(3):
        recent.get(("k",), lambda: calls.append(1))
    assert len(calls) == 3


def test_fresh_gives_a_kept_answer_only_within_its_time_and_never_loads(lookups):
    recent, clock = lookups
    assert recent.fresh(("k",)) is None
    recent.get(("k",), lambda: "kept")
    assert recent.fresh(("k",)) == "kept"
    clock[0] += 1.5
    assert recent.fresh(("k",), missing="gone") == "gone"
