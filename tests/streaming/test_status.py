"""The derived state machine, with a controllable clock."""

from datetime import datetime, timedelta, timezone

import pytest

from config import clock
from market.bars import Bar
from market.services import bars_write
from streaming.models import IngestionState
from streaming.status import FAILED, READY, REQUESTED, STALE, WARMING, derive_state, worst

NOW = datetime(2026, 11, 20, 12, 0, 0, tzinfo=timezone.utc)
NOW_MS = int(NOW.timestamp() * 1000)


@pytest.mark.parametrize("age, coverage, fatal, expected", [
    (None, 0.0, False, REQUESTED),
    (1_000, 0.10, False, WARMING),
    (30_000, 0.949, False, WARMING),
    (1_000, 0.95, False, READY),
    (30_001, 1.0, False, STALE),
    (600_000, 1.0, False, STALE),
    (600_001, 1.0, False, FAILED),
    (1_000, 1.0, True, FAILED),
    (None, 0.0, True, FAILED),
])
def test_derive_state(age, coverage, fatal, expected):
    assert derive_state(heartbeat_age_ms=age, coverage=coverage, fatal=fatal) == expected


def test_worst_state_wins():
    assert worst([READY, WARMING]) == WARMING
    assert worst([READY, STALE, REQUESTED]) == STALE
    assert worst([READY, FAILED]) == FAILED


def _fill_coverage(pair, seconds):
    start = NOW_MS - seconds * 1000
    bars_write(pair=pair, granularity="second",
               bars=[Bar(ts_ms=start + i * 1000, book_samples=1, bid_amount_sum=1, ask_amount_sum=1)
                     for i in range(seconds)])


@pytest.fixture
def at(monkeypatch):
    def move(moment):
        monkeypatch.setattr(clock, "utcnow", lambda: moment)

    move(NOW)
    return move


def status(api):
    return api.get("/api/v1/streams/binance/BTC/USDT/status").json()


def test_status_walks_requested_warming_ready_stale_failed_and_recovers(api, btc, at):
    api.post("/api/v1/streams", {"exchange": "binance", "base": "BTC", "quote": "USDT"}, format="json")
    body = status(api)
    assert body["state"] == REQUESTED and body["subscribed"] is True
    assert body["signals"] == {"coverage_24h": 0.0, "heartbeat_ms": None, "heartbeat_age_ms": None}

    state = IngestionState.objects.get(pair=btc)
    state.heartbeat_at = NOW - timedelta(seconds=2)
    state.trade_seen_ms = state.book_seen_ms = state.quote_seen_ms = NOW_MS - 2000
    state.save()
    _fill_coverage(btc, 3600)
    body = status(api)
    assert body["state"] == WARMING
    assert body["signals"]["heartbeat_age_ms"] == 2000
    assert body["signals"]["coverage_24h"] == pytest.approx(3600 / 86400, abs=1e-4)

    _fill_coverage(btc, 86_000)
    assert status(api)["state"] == READY

    at(NOW + timedelta(seconds=40))
    assert status(api)["state"] == STALE
    at(NOW + timedelta(minutes=11))
    assert status(api)["state"] == FAILED

    state.heartbeat_at = NOW + timedelta(minutes=11) - timedelta(seconds=1)
    state.save()
    assert status(api)["state"] == READY


def test_a_metric_never_seen_keeps_its_own_state(api, btc, at):
    api.post("/api/v1/streams", {"exchange": "binance", "base": "BTC", "quote": "USDT", "metrics": ["trade"]},
             format="json")
    IngestionState.objects.filter(pair=btc).update(heartbeat_at=NOW, book_seen_ms=NOW_MS)
    _fill_coverage(btc, 86_400)
    body = status(api)
    assert body["metrics"]["book"]["state"] == READY
    assert body["metrics"]["trade"]["state"] == REQUESTED
    assert body["metrics"]["trade"]["subscribed"] is True and body["metrics"]["book"]["subscribed"] is False
    assert body["state"] == REQUESTED  # the worst of the subscribed metrics


def test_a_fatal_source_error_is_failed_with_the_reason(api, btc, at):
    api.post("/api/v1/streams", {"exchange": "binance", "base": "BTC", "quote": "USDT"}, format="json")
    IngestionState.objects.filter(pair=btc).update(fatal=True, last_error="BadSymbol: delisted")
    body = status(api)
    assert body["state"] == FAILED and body["signals"]["last_error"] == "BadSymbol: delisted"


def test_status_of_an_unknown_pair_is_404(api, btc):
    response = api.get("/api/v1/streams/binance/FOO/BAR/status")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"


def test_status_of_a_pair_the_account_does_not_subscribe_is_402_saying_how_to_subscribe(api, btc):
    response = api.get("/api/v1/streams/binance/BTC/USDT/status")
    assert response.status_code == 402
    error = response.json()["error"]
    assert error["code"] == "payment_required"
    assert error["details"] == {"reason": "not_subscribed", "pair": "binance/BTC/USDT"}
    assert "POST /api/v1/streams" in error["message"]
