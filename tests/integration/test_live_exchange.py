"""A live Binance pair end to end on real processes: a local exchange replays real recorded
frames (tests/venues/server.py) in Binance's protocol, the service's own adapter connects to
it through BINANCE_WS_URL / BINANCE_REST_URL, and the whole path runs: the worker that owns
the pair (a Celery worker in full mode, daphne's in-process ingestion in embedded mode),
bars in the store, the status, the REST snapshot, the hourly series and the SSE feed.

On the way the connection is dropped, a sequence gap is injected, the stream goes silent
and the worker is killed (kill -9) and replaced. Afterwards every stored second equals an
exact Decimal consumer of the frames the service received (trades, 1 % depth, best bid and
ask), no second is stored twice, the only seconds missing are the ones the status reports
as a gap (nobody was listening), and the status told each thing as it happened."""

from __future__ import annotations

import time
from contextlib import ExitStack
from decimal import Decimal

import httpx
import orjson
import pytest
from django.conf import settings
from django.db import connection

from accounts.services import api_key_create
from market.models import Exchange, Pair
from tests.second_bars import stored_seconds
from market.services import asset_ensure
from tests.venues.reference import binance_reference
from tests.venues.server import BINANCE_BTC, ReplayingExchange

from .faults import kill9, wait_for
from .servers import daphne_processes, database_url_for
from .workers import celery_worker

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

PAIR_PATH = "/api/v1/streams/binance/BTC/USDT"
TICK, STEP = Decimal("0.01"), Decimal("0.00001")  # BTCUSDT's, as catalog_sync records them


def at(value: Decimal, increment: Decimal) -> float:
    """The exact value at the precision the service serves (it must serve exactly this)."""
    return float(value.quantize(increment))


def live_binance_pair():
    exchange, _ = Exchange.objects.update_or_create(slug="binance", defaults={
        "name": "Binance", "source": Exchange.Source.EXCHANGE, "ccxt_id": "binance"})
    pair, _ = Pair.objects.update_or_create(exchange=exchange, base=asset_ensure("BTC"), quote=asset_ensure("USDT"),
                                            defaults={"price_increment": TICK, "amount_increment": STEP})
    return pair


def status_of(base, headers):
    return httpx.get(f"{base}{PAIR_PATH}/status", headers=headers, timeout=30).json()


def sse_bars(base, headers, seconds: float) -> list[dict]:
    bars, event = [], None
    deadline = time.monotonic() + seconds
    with httpx.stream("GET", f"{base}{PAIR_PATH}/events", headers=headers, timeout=seconds + 10) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and event == "bar":
                bars.append(orjson.loads(line.split(":", 1)[1]))
            if time.monotonic() > deadline:
                break
    return bars


def run_scenario(make_account, *, full: bool):
    pair = live_binance_pair()
    key = api_key_create(account=make_account(), name="live").plaintext
    headers = {"Authorization": f"Bearer {key}"}
    with ExitStack() as stack:
        venue = stack.enter_context(ReplayingExchange.binance({"BTCUSDT": BINANCE_BTC}, limit_s=80))
        env = {"DATABASE_URL": database_url_for(connection.settings_dict), "BINANCE_WS_URL": venue.ws_url,
               "BINANCE_REST_URL": venue.rest_url, "FEED_STALE_SECONDS": "2", "FEED_IDLE_SECONDS": "10",
               "INGESTION_AUTOSTART": "true", "INGESTION_LEASE_SECONDS": "5"}
        if full:
            env.update(REDIS_URL=settings.REDIS_URL, CELERY_BROKER_URL=settings.REDIS_URL,
                       CELERY_TASK_ALWAYS_EAGER="false", INGESTION_IN_PROCESS="false")
            worker = stack.enter_context(celery_worker(env=env, concurrency=4))
        else:
            env.update(REDIS_URL="", INGESTION_IN_PROCESS="true")
        servers = ExitStack()
        (base,) = servers.enter_context(daphne_processes(1, env=env))
        subscribed = httpx.post(f"{base}/api/v1/streams", json={"exchange": "binance", "base": "BTC", "quote": "USDT"},
                                headers=headers, timeout=30)
        assert subscribed.status_code == 201, subscribed.text
        seen = {}

        def feed_state(wanted):
            signals = status_of(base, headers)["signals"]
            seen.setdefault(signals.get("source", {}).get("state"), signals)
            return signals.get("source", {}).get("state") == wanted and signals

        wait_for(lambda: feed_state("live"), timeout=30, interval=0.3, message="the feed to be live")
        time.sleep(6)
        venue.drop_connections()
        dropped = wait_for(lambda: (lambda s: s.get("disconnects", 0) >= 1 and s)(
            status_of(base, headers)["signals"]["source"]), timeout=15, interval=0.3,
            message="the drop to show in the status")
        assert dropped["recent_disconnects"] >= 1
        time.sleep(6)
        venue.inject_gap("BTCUSDT")
        wait_for(lambda: status_of(base, headers)["signals"]["source"].get("resyncs", 0) >= 1, timeout=15,
                 interval=0.3, message="the resync after the gap to show in the status")
        assert status_of(base, headers)["state"] in ("WARMING", "READY")  # heartbeats from real messages
        time.sleep(4)
        venue.silence(3)
        time.sleep(8)
        # the worker that owns the pair dies; another one takes over through the lease
        if full:
            kill9(worker)
            stack.enter_context(celery_worker(env=env, concurrency=4))
        else:
            kill9_daphne = base.pid
            import os
            import signal

            os.kill(kill9_daphne, signal.SIGKILL)
            servers.close()
            (base,) = servers.enter_context(daphne_processes(1, env=env))
        stack.callback(servers.close)
        wait_for(lambda: status_of(base, headers)["signals"].get("gaps"), timeout=40, interval=0.5,
                 message="the new worker to record the gap")
        live_bars = sse_bars(base, headers, seconds=5)
        assert venue.finished.wait(80)
        final = wait_for(lambda: (lambda s: s["signals"]["heartbeat_age_ms"] is not None and s)(
            status_of(base, headers)), timeout=10, message="a status")
        time.sleep(3)  # the last seconds reach the store
        snapshot = httpx.post(f"{base}{PAIR_PATH}/snapshot", headers=headers, timeout=60, json={
            "metrics": ["trade", "book", "quote"], "granularity": "second",
            "from_ms": int(time.time() * 1000) - 200_000, "to_ms": int(time.time() * 1000)}).json()
        today = time.strftime("%Y-%m-%d", time.gmtime())
        candles = httpx.post(f"{base}/api/v1/market/candlestick", headers=headers, timeout=60, json={
            "exchange": "binance", "symbol": "BTC-USDT", "start": today, "end": today, "resolution": "hourly"}).json()
    return pair, venue, snapshot, final, live_bars, candles


def check(pair, venue, snapshot, final, live_bars, candles):
    rows = {row["ts_ms"]: row for row in snapshot["bars"]}
    reference = binance_reference(venue, "BTCUSDT", until_ms=max(rows) + 1000)
    stored = [ts for (ts,) in stored_seconds(pair, columns=("ts_ms",))]
    assert len(stored) == len(set(stored))  # no second twice
    gaps = final["signals"]["gaps"]
    assert len(gaps) == 1 and gaps[0][1] > gaps[0][0]
    first, last = min(rows), max(rows)
    missing = [s for s in range(first, last + 1000, 1000) if s not in rows]
    assert missing and all(gaps[0][0] <= s < gaps[0][1] for s in missing), (missing, gaps)
    compared = 0
    feed = final["signals"]["source"]  # its late_events and rereads say why a second would differ
    for second, row in rows.items():
        ref = reference.get(second)
        assert ref is not None, (second, feed)
        assert (row["trade_count"] or 0) == ref.trade_count, (second, feed)
        if ref.trade_count:
            assert (row["open"], row["high"], row["low"], row["close"]) == (
                at(ref.open, TICK), at(ref.high, TICK), at(ref.low, TICK), at(ref.close, TICK)), (second, feed)
            assert (row["volume"], row["buy_volume"], row["sell_volume"]) == (
                at(ref.volume, STEP), at(ref.buy_volume, STEP), at(ref.sell_volume, STEP)), (second, feed)
        if row["bid_depth"] is None:
            continue
        assert ref.in_sync, (second, feed)
        assert (row["bid_depth"], row["ask_depth"]) == (at(ref.bid_depth, STEP), at(ref.ask_depth, STEP)), (second, feed)
        if row["bid_price"] is not None and ref.bid_price is not None:
            assert (row["bid_price"], row["ask_price"]) == (at(ref.bid_price, TICK), at(ref.ask_price, TICK)), (second, feed)
        compared += 1
    assert compared >= 40
    # the counters are the current feed's: the worker that took over started a new one
    source = final["signals"]["source"]
    assert source["state"] == "live" and source["degraded"] is False
    by_hour = {}
    for second, row in rows.items():
        if row["trade_count"]:
            hour = time.strftime("%Y-%m-%dT%H:00:00Z", time.gmtime(second // 1000))
            by_hour.setdefault(hour, []).append(row)
    assert {c["date"]: c["observation_count"] for c in candles["data"]} == {
        hour: sum(r["trade_count"] for r in hour_rows) for hour, hour_rows in by_hour.items()}  # the series roll-up
    for candle in candles["data"]:
        hour_rows = sorted(by_hour[candle["date"]], key=lambda r: r["ts_ms"])
        assert (candle["open"], candle["close"]) == (hour_rows[0]["open"], hour_rows[-1]["close"])
        assert candle["high"] == max(r["high"] for r in hour_rows) and candle["low"] == min(r["low"] for r in hour_rows)
    assert live_bars and all(bar["ts_ms"] in rows for bar in live_bars)
    for bar in live_bars:  # the SSE bar is the stored one, at the same precision
        assert {k: bar[k] for k in ("trade_count", "close", "volume", "bid_depth")} == {
            k: rows[bar["ts_ms"]][k] for k in ("trade_count", "close", "volume", "bid_depth")}


@pytest.mark.redis
def test_a_live_binance_pair_is_exact_through_faults_in_full_mode(make_account):
    check(*run_scenario(make_account, full=True))


def test_a_live_binance_pair_is_exact_through_faults_in_embedded_mode(make_account):
    check(*run_scenario(make_account, full=False))
