"""The live Binance adapter over a real socket, against a local exchange that replays real
recorded frames (tests/venues/server.py): the book it keeps equals an exact Decimal
consumer of the same frames at the end of every second, through a dropped connection, a
sequence gap and a silent stream, and its status follows what happened."""

import asyncio
import threading
import time

import pytest

from market.sources.bar_builder import BarBuilder
from market.sources.events import BookLost, PairRef
from market.sources.exchange import SourceFatalError
from market.sources.venues import feed_for
from streaming.feeds import PairFeed

from .reference import binance_reference
from .server import BINANCE_BTC, BINANCE_ETH, ReplayingExchange

pytestmark = pytest.mark.slow

BTC = PairRef("binance", "BTC", "USDT")


class Running:
    """A venue feed streaming into a PairFeed on its own event loop thread."""

    def __init__(self, feed, ref):
        self.feed, self.ref = feed, ref
        self.buffer = PairFeed(ref, lag_ms=1000)
        self.states: list[tuple[str, str]] = []
        self.error: BaseException | None = None
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def on_status(self, status):
        self.states.append((status.state, status.reason))
        self.last_status = status
        self.buffer.on_status(status)

    def _run(self):
        self.task = self.loop.create_task(self.feed.stream(self.ref, self.buffer.sink, self.on_status))
        try:
            self.loop.run_until_complete(self.task)
        except asyncio.CancelledError:
            pass
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            self.error = exc

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        if not self.task.done():
            self.loop.call_soon_threadsafe(self.task.cancel)
        self.thread.join(10)


def seconds_of(events, ref=BTC):
    """Our bars and the book at the end of each second, from the events in (ts, arrival) order."""
    builder = BarBuilder(ref)
    out, pending = {}, list(events)
    start = pending[0].ts_ms - pending[0].ts_ms % 1000
    i = 0
    second = start
    while i < len(pending):
        while i < len(pending) and pending[i].ts_ms < second + 1000:
            builder.feed(pending[i])
            i += 1
        (bar,) = builder.flush(second + 1000)
        bids, asks = builder.book()
        out[second] = (bar, bids[:10], asks[:10])
        second += 1000
    return out


def compare_with_reference(ours, reference):
    """Each second of ours against the exact consumer's: (seconds compared, seconds we did not sample)."""
    compared, unsampled = 0, []
    for second, (bar, top_bids, top_asks) in ours.items():
        ref = reference.get(second)
        if ref is None:
            continue
        assert bar.trade_count == ref.trade_count, second
        if ref.trade_count:
            assert (bar.open, bar.high, bar.low, bar.close) == (
                float(ref.open), float(ref.high), float(ref.low), float(ref.close)), second
            assert bar.volume == pytest.approx(float(ref.volume), rel=1e-9)
            assert bar.buy_volume == pytest.approx(float(ref.buy_volume), rel=1e-9, abs=1e-12)
        if not bar.book_samples:
            unsampled.append(second)
            continue
        assert ref.in_sync, second  # we never sample a book an exact consumer would not hold
        assert top_bids == [(float(p), float(q)) for p, q in ref.top_bids], second
        assert top_asks == [(float(p), float(q)) for p, q in ref.top_asks], second
        assert bar.bid_amount_sum == pytest.approx(float(ref.bid_depth), rel=1e-9), second
        assert bar.ask_amount_sum == pytest.approx(float(ref.ask_depth), rel=1e-9), second
        if bar.bid_price is not None and ref.bid_price is not None:
            assert (bar.bid_price, bar.ask_price) == (float(ref.bid_price), float(ref.ask_price)), second
        compared += 1
    return compared, unsampled


def test_the_live_adapter_keeps_the_exact_book_through_a_drop_a_gap_and_a_silence():
    with ReplayingExchange.binance({"BTCUSDT": BINANCE_BTC}, limit_s=36) as venue:
        feed = feed_for("binance", ws_url=venue.ws_url, rest_url=venue.rest_url, stale_after_s=2.0,
                        backoff_base=0.2, backoff_max=1.0)
        with Running(feed, BTC) as running:
            time.sleep(8)
            venue.drop_connections()
            time.sleep(8)
            venue.inject_gap("BTCUSDT")
            time.sleep(6)
            venue.silence(5)
            assert venue.finished.wait(30)
            time.sleep(0.5)
        assert running.error is None, running.error
        events = running.buffer.events(0, 2**62)
        status = running.last_status

    states = [state for state, _ in running.states]
    reasons = " | ".join(reason for _, reason in running.states)
    assert states[:3] == ["connecting", "syncing", "live"]
    assert "connection closed by the exchange" in reasons  # the drop
    assert "sequence gap: expected U=" in reasons  # the gap, resynced on the open socket
    assert "no message for 2 s" in reasons  # the silence, taken for a dead stream
    # the silence outlasts the stale timeout: the fresh connection is silent too, and is dropped again
    assert states.count("live") >= 4 and status.disconnects >= 2 and status.resyncs >= 1
    assert status.trades_missed > 0  # trades sent while the connection was down or silent
    assert type(events[-1]) is BookLost and events[-1].reason == "closed"
    events = events[:-1]
    assert sum(type(e) is BookLost for e in events) == 3  # every lost book was said

    compared, unsampled = compare_with_reference(seconds_of(events), binance_reference(venue, "BTCUSDT"))
    assert compared >= 25
    assert len(unsampled) <= 6, unsampled  # only around the three disruptions


class RunningTogether:
    """Venue feeds of several pairs streaming on one event loop thread, as a worker runs them."""

    def __init__(self, feeds: dict):
        self.loop = asyncio.new_event_loop()
        self.pairs = {ref: Running(feed, ref) for ref, feed in feeds.items()}
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        for running in self.pairs.values():
            asyncio.run_coroutine_threadsafe(self._start(running), self.loop).result(5)
        return self

    async def _start(self, running):
        running.task = asyncio.ensure_future(running.feed.stream(running.ref, running.buffer.sink, running.on_status))
        running.task.add_done_callback(lambda task: setattr(
            running, "error", None if task.cancelled() else task.exception()))

    def stop(self, ref):
        self.loop.call_soon_threadsafe(self.pairs[ref].task.cancel)

    def __exit__(self, *exc):
        for ref in self.pairs:
            self.stop(ref)
        time.sleep(0.5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


ETH = PairRef("binance", "ETH", "USDT")


def test_pairs_share_one_connection_each_exact_through_a_drop_and_one_pair_leaving():
    with ReplayingExchange.binance({"BTCUSDT": BINANCE_BTC, "ETHUSDT": BINANCE_ETH}, limit_s=30) as venue:
        feeds = {ref: feed_for("binance", ws_url=venue.ws_url, rest_url=venue.rest_url, stale_after_s=5.0,
                               backoff_base=0.2, backoff_max=1.0) for ref in (BTC, ETH)}
        with RunningTogether(feeds) as running:
            time.sleep(6)
            assert venue.clients == 1  # both pairs on one socket
            venue.drop_connections()
            time.sleep(6)
            assert venue.clients == 1  # rejoined together
            running.stop(ETH)
            time.sleep(2)
            assert venue.clients == 1  # the other pair still on it
            assert venue.finished.wait(30)
            time.sleep(0.5)
        for pair in running.pairs.values():
            assert pair.error is None, pair.error

    eth_streams = {"ethusdt@depth@100ms", "ethusdt@trade", "ethusdt@bookTicker"}
    assert any(method == "SUBSCRIBE" for method, _ in venue.requests)  # a pair joined an open connection
    assert ("UNSUBSCRIBE", eth_streams) in venue.requests  # the pair that left, and only it
    eth_frames = [frame for frame in venue.log if frame.key == "ETHUSDT" and frame.kind != "disconnect"]
    assert eth_frames[-1].delivered is False  # nobody reads it once it left
    for ref, symbol, least in ((BTC, "BTCUSDT", 18), (ETH, "ETHUSDT", 6)):
        pair = running.pairs[ref]
        states = [state for state, _ in pair.states]
        assert states[:3] == ["connecting", "syncing", "live"], (ref, pair.states)
        assert "connection closed by the exchange" in " | ".join(reason for _, reason in pair.states)
        events = pair.buffer.events(0, 2**62)
        assert type(events[-1]) is BookLost
        ours = seconds_of(events[:-1], ref)
        if ref == ETH:
            # the second it left in: frames the venue wrote before it read the UNSUBSCRIBE are
            # delivered (the reference holds them) but no longer the pair's to read
            ours.pop(max(ours))
        compared, unsampled = compare_with_reference(ours, binance_reference(venue, symbol))
        assert compared >= least, (ref, compared)
        assert len(unsampled) <= 3, (ref, unsampled)  # only around the drop


def test_an_unknown_symbol_fails_at_once_with_the_exchange_s_reason():
    with ReplayingExchange.binance({"BTCUSDT": BINANCE_BTC}, limit_s=5) as venue:
        feed = feed_for("binance", ws_url=venue.ws_url, rest_url=venue.rest_url, stale_after_s=2.0)
        with Running(feed, PairRef("binance", "NOPE", "USDT")) as running:
            running.thread.join(10)
    assert isinstance(running.error, SourceFatalError)
    assert "unknown symbol" in running.error.reason and "Invalid symbol" in running.error.reason
    assert running.states[-1][0] == "failed"


def test_coinbase_level2_syncs_from_the_snapshot_and_follows_the_updates():
    products = ["SKL-USD"]
    with ReplayingExchange.coinbase(products, limit_s=12) as venue:
        feed = feed_for("coinbase", ws_url=venue.ws_url, stale_after_s=5.0)
        with Running(feed, PairRef("coinbase", "SKL", "USD")) as running:
            assert venue.finished.wait(20)
            time.sleep(0.3)
        events = running.buffer.events(0, 2**62)
        true_book = venue.books["SKL-USD"]
    assert type(events[-1]) is BookLost  # closing the feed says the book is no longer followed
    events = events[:-1]
    assert running.error is None and [s for s, _ in running.states[:3]] == ["connecting", "syncing", "live"]
    builder = BarBuilder(PairRef("coinbase", "SKL", "USD"))
    builder.feed_many(events)
    bids, asks = builder.book()
    assert bids == [(float(p), float(q)) for p, (_, q) in sorted(true_book.bids.items(), reverse=True)]
    assert asks == [(float(p), float(q)) for p, (_, q) in sorted(true_book.asks.items())]


def test_coinbase_refuses_an_unknown_product_at_once():
    with ReplayingExchange.coinbase(["SKL-USD"], limit_s=3) as venue:
        feed = feed_for("coinbase", ws_url=venue.ws_url, stale_after_s=5.0)
        with Running(feed, PairRef("coinbase", "NOPE", "USD")) as running:
            running.thread.join(10)
    assert isinstance(running.error, SourceFatalError) and "not a valid product" in running.error.reason

