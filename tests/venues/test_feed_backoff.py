"""The venue feeds' reconnect loop and REST snapshot retries, without a network: the delays,
the status transitions and the counters they report."""

import asyncio

import pytest

from market.sources.events import PairRef
from market.sources.exchange import SourceFatalError
from market.sources.venues import feed as feed_module
from market.sources.venues.feed import LIVE, BinanceFeed, VenueFeed

PAIR = PairRef("binance", "BTC", "USDT")


class FakeCodec:
    trades_missed, synced_at_ms, snapshot_reach_pct = 0, None, None

    def __init__(self):
        self.lost = []

    def lose_book(self, reason):
        self.lost.append(reason)


class ScriptedFeed(VenueFeed):
    venue, WS_URL, REST_URL = "test", "ws://nowhere", "http://nowhere"

    def __init__(self, script, **kwargs):
        self.delays = []

        async def sleep(delay):
            self.delays.append(delay)

        super().__init__(backoff_jitter=0.0, sleep=sleep, **kwargs)
        self.script = list(script)

    def make_codec(self, pair):
        return FakeCodec()

    async def _connection(self, pair, sink):
        step = self.script.pop(0)
        if step == "live":
            self._set(LIVE)
            step = self.script.pop(0)
        raise step


def test_reconnects_back_off_reset_once_live_and_a_fatal_error_fails_the_feed():
    statuses = []
    feed = ScriptedFeed([feed_module._Retry("closed by the exchange"), "live", OSError("reset"),
                         ConnectionError(), SourceFatalError("unknown symbol")])

    with pytest.raises(SourceFatalError):
        asyncio.run(feed.stream(PAIR, lambda event: None, statuses.append))

    assert feed.delays == [0.5, 0.5, 1.0]  # the drop after being live is the first again
    assert [(s.state, s.reason, s.disconnects) for s in statuses] == [
        ("connecting", "", 0),
        ("reconnecting", "closed by the exchange", 1),
        ("live", "", 1),
        ("reconnecting", "reset", 2),
        ("reconnecting", "ConnectionError", 3),
        ("failed", "unknown symbol", 3),
    ]
    assert statuses[-1].recent_disconnects == 3 and statuses[-1].degraded
    assert feed.codec.lost == ["closed by the exchange", "reset", "ConnectionError"]


class Busy:
    status = 503

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False

    async def read(self):
        return b"busy"


class BusySession:
    def __init__(self):
        self.gets = 0

    def get(self, url, params):
        self.gets += 1
        return Busy()


def test_a_busy_depth_snapshot_is_asked_five_times_then_drops_the_connection():
    delays = []

    async def sleep(delay):
        delays.append(delay)

    feed = BinanceFeed(backoff_jitter=0.0, sleep=sleep)
    feed._session = BusySession()

    with pytest.raises(feed_module._Retry, match="depth snapshot: HTTP 503 5 times"):
        asyncio.run(feed._snapshot("BTCUSDT"))

    assert feed._session.gets == 5 and delays == [0.5, 1.0, 2.0, 4.0]


def test_depth_snapshots_spend_a_budget_of_request_weight_a_minute_and_wait_their_turn():
    now = [0.0]
    waits = []

    async def sleep(delay):
        waits.append(delay)
        now[0] += delay

    async def spend_all():
        budget = feed_module._RestBudget(3000, clock=lambda: now[0])
        for _ in range(14):
            await budget.spend(BinanceFeed.DEPTH_WEIGHT, sleep)

    asyncio.run(spend_all())

    # a minute's weight at once (12 snapshots of 250), then one every 5 s as the budget refills
    assert waits == [pytest.approx(5.0), pytest.approx(5.0)] and now[0] == pytest.approx(10.0)


def test_the_service_s_binance_feeds_carry_the_configured_budget(settings):
    from streaming.feeds import LiveExchangeSource

    settings.BINANCE_REST_WEIGHT_PER_MINUTE = 1200.0
    feed = LiveExchangeSource("binance").make_feed()
    assert isinstance(feed, BinanceFeed) and feed.rest_weight_per_minute == 1200.0
    assert not hasattr(LiveExchangeSource("coinbase").make_feed(), "rest_weight_per_minute")
