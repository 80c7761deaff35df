"""The ccxt adapter on recorded ccxt.pro output (binance BTC/USDT, watch_order_book limit=5).
No network: the stream test drives ExchangeSource with a scripted fake client."""

import asyncio
import copy
import json
from pathlib import Path

import ccxt
import pytest

from market.sources.events import BookDelta, BookSnapshot, PairRef, Quote, Trade
from market.sources.exchange import (
    ExchangeSource,
    SourceFatalError,
    apply_book_event,
    book_from_ccxt,
    ccxt_symbol,
    quote_from_ccxt,
    trades_from_ccxt,
)

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "ccxt_binance_btcusdt.json").read_text())
BOOKS, TRADES, TICKERS = FIXTURE["order_books"], FIXTURE["trades"], FIXTURE["tickers"]
DEPTH = FIXTURE["depth"]
PAIR = PairRef("binance", "BTC", "USDT")
CLOCK_MS = 1_795_132_800_050  # the fallback clock: the first (REST) book has no timestamp


def clock():
    return CLOCK_MS


# -- translation ----------------------------------------------------------------------------


def test_trades_from_ccxt_sides_and_timestamps():
    trades = trades_from_ccxt(TRADES[0] + TRADES[1])
    assert trades == [
        Trade(ts_ms=1795132800121, price=91234.56, qty=0.01234, side="buy", trade_id="5412345678"),
        Trade(ts_ms=1795132800301, price=91234.55, qty=0.0025, side="sell", trade_id="5412345679"),
        Trade(ts_ms=1795132800301, price=91234.55, qty=0.04, side="sell", trade_id="5412345680"),
    ]
    # binance "m": true (buyer is the maker) means the taker sold
    assert [t["info"]["m"] for t in TRADES[1]] == [True, True]


def test_trades_timestamp_fallbacks_and_unusable_trades_skipped():
    raw = copy.deepcopy(TRADES[0][0])
    raw["timestamp"] = None  # -> the ISO datetime
    no_time = dict(raw, datetime=None, id=None)  # -> the clock, no id
    no_side = dict(TRADES[0][0], side=None)
    trades = trades_from_ccxt([raw, no_time, no_side], clock=clock)
    assert [(t.ts_ms, t.trade_id) for t in trades] == [(1795132800121, "5412345678"), (CLOCK_MS, None)]


def test_first_book_is_a_snapshot_with_fallback_time():
    assert BOOKS[0]["timestamp"] is None and BOOKS[0]["datetime"] is None
    event = book_from_ccxt(BOOKS[0], None, clock=clock)
    assert event == BookSnapshot(
        ts_ms=CLOCK_MS,
        bids=((91234.55, 1.80221), (91234.54, 0.006), (91234.0, 0.51), (91233.1, 0.25), (91232.8, 2.1)),
        asks=((91234.56, 0.40413), (91234.9, 0.12), (91235.0, 2.0), (91235.5, 0.75), (91236.2, 1.3)),
    )


def test_next_book_is_a_delta_of_only_the_changed_levels():
    event = book_from_ccxt(BOOKS[1], BOOKS[0], clock=clock)
    # bid size change; ask 91234.90 cancelled inside the view -> 0; 91237.00 new 5th level
    assert event == BookDelta(ts_ms=1795132800180, bids=((91234.55, 1.50221),),
                              asks=((91234.9, 0.0), (91237.0, 0.9)))


def test_removed_level_inside_view_gets_qty_zero():
    event = book_from_ccxt(BOOKS[3], BOOKS[2])
    assert event.ts_ms == 1795132800380
    assert (91234.56, 0.0) in event.asks  # the best ask was lifted: inside the view, gone
    assert event.asks == ((91234.56, 0.0), (91238.4, 0.05))
    assert event.bids == ((91233.1, 0.4),)


def test_level_scrolled_out_of_truncated_view_is_not_removed():
    # 91234.20 enters the 5 bid levels and pushes 91232.80 below the view; it is still on
    # the book (no depth update removed it), so it must not be reported with qty 0
    assert [91232.8, 2.1] in BOOKS[1]["bids"] and [91232.8, 2.1] not in BOOKS[2]["bids"]
    event = book_from_ccxt(BOOKS[2], BOOKS[1])
    assert event == BookDelta(ts_ms=1795132800280, bids=((91234.2, 0.33),), asks=())


def test_unchanged_book_is_an_empty_delta_and_empty_side_clears():
    assert book_from_ccxt(BOOKS[2], BOOKS[2]) == BookDelta(ts_ms=BOOKS[2]["timestamp"])
    empty_asks = dict(BOOKS[2], asks=[])
    event = book_from_ccxt(empty_asks, BOOKS[2])
    assert event.bids == () and [q for _, q in event.asks] == [0.0] * 5


def test_consumer_book_removes_a_stale_level_when_it_comes_back_into_range():
    state = apply_book_event(None, book_from_ccxt(BOOKS[1], None))
    state = apply_book_event(state, book_from_ccxt(BOOKS[2], state))
    assert [91232.8, 2.1] in state["bids"]  # kept: scrolled out, not removed
    # the book later shows deeper bids again, and 91232.80 is no longer among them
    deeper = dict(BOOKS[2], timestamp=BOOKS[2]["timestamp"] + 100,
                  bids=[[91234.55, 1.50221], [91234.54, 0.006], [91233.1, 0.25], [91232.5, 1.0]])
    event = book_from_ccxt(deeper, state)
    assert event.bids == ((91234.2, 0.0), (91234.0, 0.0), (91232.8, 0.0), (91232.5, 1.0))
    state = apply_book_event(state, event)
    assert state["bids"] == [[91234.55, 1.50221], [91234.54, 0.006], [91233.1, 0.25], [91232.5, 1.0]]


def test_depth_cuts_an_over_long_book():
    event = book_from_ccxt(BOOKS[0], None, depth=2, clock=clock)
    assert event.bids == ((91234.55, 1.80221), (91234.54, 0.006))
    assert event.asks == ((91234.56, 0.40413), (91234.9, 0.12))


def test_ticker_to_quote():
    assert quote_from_ccxt(TICKERS[0]) == Quote(ts_ms=1795132800499, bid_price=91234.55, bid_qty=1.50221,
                                                ask_price=91234.56, ask_qty=0.40413)
    assert quote_from_ccxt(dict(TICKERS[0], bidVolume=None)).bid_qty == 0.0
    assert quote_from_ccxt(dict(TICKERS[0], bid=None)) is None  # e.g. a mini ticker
    assert quote_from_ccxt(dict(TICKERS[0], timestamp=None, datetime=None), clock=clock).ts_ms == CLOCK_MS


def test_ccxt_symbol():
    assert ccxt_symbol(PAIR) == "BTC/USDT" == FIXTURE["symbol"]


# -- the live stream, on a scripted fake client ------------------------------------------------


class FakeClient:
    """Stands in for a ccxt.pro exchange. `script` is the recorded arrival order:
    (channel, payload) where payload is returned, or raised when it is an exception.
    A watch call waits until the head of the script is for its channel; once the script
    is used up it waits forever (until cancelled)."""

    def __init__(self, script):
        self.script = list(script)
        self.calls = []
        self.closed = False
        self._cond = asyncio.Condition()

    async def _next(self, channel):
        async with self._cond:
            await self._cond.wait_for(lambda: bool(self.script) and self.script[0][0] == channel)
            _, payload = self.script.pop(0)
            self._cond.notify_all()
        if isinstance(payload, BaseException):
            raise payload
        return copy.deepcopy(payload)

    async def watch_trades(self, symbol):
        self.calls.append(("trades", symbol))
        return await self._next("trades")

    async def watch_order_book(self, symbol, limit=None):
        self.calls.append(("order_book", symbol, limit))
        return await self._next("order_book")

    async def watch_ticker(self, symbol):
        self.calls.append(("ticker", symbol))
        return await self._next("ticker")

    async def close(self):
        self.closed = True


def recorded_script():
    data = {"trades": TRADES, "order_book": BOOKS, "ticker": TICKERS}
    return [(channel, data[channel][i]) for channel, i in FIXTURE["arrival_order"]]


class SleepRecorder:
    def __init__(self):
        self.delays = []

    async def __call__(self, delay):
        self.delays.append(delay)
        await asyncio.sleep(0)


def make_source(client, sleep, **kwargs):
    return ExchangeSource("binance", depth=DEPTH, client_factory=lambda: client, clock=clock,
                          sleep=sleep, backoff_jitter=0.0, **kwargs)


def test_stream_converts_in_arrival_order_reconnects_and_surfaces_fatal_errors():
    script = recorded_script() + [
        ("order_book", ccxt.NetworkError("binance connection closed by remote server, closing code 1006")),
        ("order_book", BOOKS[4]),
        ("trades", ccxt.RequestTimeout("binance ping-pong keepalive missing on time")),
        ("trades", TRADES[3]),
        ("ticker", TICKERS[1]),
        ("trades", TRADES[3]),  # resent after the reconnect: deduplicated by trade id
        ("trades", ccxt.BadSymbol("binance does not have market symbol BTC/USDT")),
    ]
    client = FakeClient(script)
    sleep = SleepRecorder()
    source = make_source(client, sleep)
    got = []

    with pytest.raises(SourceFatalError) as info:
        asyncio.run(source.stream(PAIR, got.append))

    assert "BadSymbol" in info.value.reason and "trades" in info.value.reason
    assert isinstance(info.value.__cause__, ccxt.BadSymbol)
    assert client.closed and client.script == []
    assert ("order_book", "BTC/USDT", DEPTH) in client.calls and ("ticker", "BTC/USDT") in client.calls
    assert sleep.delays == [0.5, 0.5]  # one failure each on two channels: first backoff step

    snap0 = book_from_ccxt(BOOKS[0], None, clock=clock)
    expected = [
        snap0,
        *trades_from_ccxt(TRADES[0]),
        book_from_ccxt(BOOKS[1], BOOKS[0]),
        *trades_from_ccxt(TRADES[1]),
        book_from_ccxt(BOOKS[2], BOOKS[1]),
        *trades_from_ccxt(TRADES[2]),
        book_from_ccxt(BOOKS[3], BOOKS[2]),
        quote_from_ccxt(TICKERS[0]),
        book_from_ccxt(BOOKS[4], None),  # resync after the book reconnect: a snapshot
        *trades_from_ccxt(TRADES[3]),
        quote_from_ccxt(TICKERS[1]),
    ]
    assert got == expected
    assert isinstance(got[-3], BookSnapshot) and got[-3].ts_ms == 1795132801480
    # the scrolled-out bid never appears as removed
    assert not any(isinstance(e, BookDelta) and (91232.8, 0.0) in e.bids for e in got)

    # the Source protocol reads the same events back from the buffer, in time order
    assert source.earliest_ms(PAIR) == CLOCK_MS
    window = list(source.events(PAIR, 1795132800100, 1795132800400))
    assert window == sorted((e for e in expected if 1795132800100 <= e.ts_ms < 1795132800400),
                            key=lambda e: e.ts_ms)
    assert window[0] == trades_from_ccxt(TRADES[0])[0]
    whole = list(source.events(PAIR, 0, 2**62))
    split = list(source.events(PAIR, 0, 1795132800300)) + list(source.events(PAIR, 1795132800300, 2**62))
    assert whole == split and len(whole) == len(expected)


def test_backoff_grows_exponentially_and_unavailable_becomes_fatal():
    outage = [("ticker", ccxt.ExchangeNotAvailable("binance 503 Service Unavailable"))] * 4
    client = FakeClient(outage)
    sleep = SleepRecorder()
    source = make_source(client, sleep, max_unavailable_retries=3, backoff_max=1.5)

    with pytest.raises(SourceFatalError) as info:
        asyncio.run(source.stream(PAIR, lambda event: None))

    assert sleep.delays == [0.5, 1.0, 1.5]  # 0.5 * 2**n, capped at backoff_max
    assert "not available after 4 tries" in info.value.reason
    assert client.closed


def test_a_message_restarts_the_backoff_and_network_retries_can_be_bounded():
    script = [("ticker", ccxt.ExchangeNotAvailable("binance 503")), ("ticker", TICKERS[0]),
              ("ticker", ccxt.RequestTimeout("timed out")), ("ticker", ccxt.ExchangeNotAvailable("binance 503")),
              ("ticker", ccxt.NetworkError("closed 1006"))]
    sleep = SleepRecorder()
    source = make_source(FakeClient(script), sleep, max_unavailable_retries=1, max_network_retries=2)

    with pytest.raises(SourceFatalError) as info:
        asyncio.run(source.stream(PAIR, lambda event: None))

    # the message reset both counts: the later 503 is the first unavailable in a row again
    assert sleep.delays == [0.5, 0.5, 1.0]
    assert "3 network failures in a row: NetworkError" in info.value.reason
    assert isinstance(info.value.__cause__, ccxt.NetworkError)


def test_authentication_error_is_fatal_and_async_sink_is_supported():
    client = FakeClient([("order_book", BOOKS[0]),
                         ("trades", ccxt.AuthenticationError("binance API-key format invalid"))])
    got = []

    async def sink(event):
        await asyncio.sleep(0)
        got.append(event)

    with pytest.raises(SourceFatalError, match="AuthenticationError"):
        asyncio.run(make_source(client, SleepRecorder()).stream(PAIR, sink))
    assert got == [book_from_ccxt(BOOKS[0], None, clock=clock)]


def test_close_stops_the_stream_cleanly():
    client = FakeClient(recorded_script())
    source = make_source(client, SleepRecorder())
    got = []

    async def main():
        task = asyncio.create_task(source.stream(PAIR, got.append))
        while client.script:
            await asyncio.sleep(0)
        await source.close()
        await asyncio.wait_for(task, timeout=5)

    asyncio.run(main())
    assert client.closed
    assert len(got) == 1 + 1 + 1 + 2 + 1 + 1 + 1 + 1  # all recorded messages, then a clean stop


def test_pairs_share_one_client_closed_by_close():
    made = []

    def factory():
        made.append(FakeClient([]))  # nothing arrives: the watchers wait
        return made[-1]

    source = ExchangeSource("binance", client_factory=factory)

    async def main():
        tasks = [asyncio.create_task(source.stream(pair, lambda event: None))
                 for pair in (PAIR, PairRef("binance", "ETH", "USDT"))]
        await asyncio.sleep(0.01)
        assert len(made) == 1 and {c[1] for c in made[0].calls} == {"BTC/USDT", "ETH/USDT"}
        await source.close()
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=5)

    asyncio.run(main())
    assert made[0].closed


def test_unknown_exchange_id_is_fatal():
    with pytest.raises(SourceFatalError, match="no exchange"):
        asyncio.run(ExchangeSource("not-an-exchange").stream(PAIR, lambda event: None))


def test_earliest_ms_without_buffer_is_now():
    source = ExchangeSource("binance", clock=clock)
    assert source.earliest_ms(PAIR) == CLOCK_MS
    assert list(source.events(PAIR, 0, 2**62)) == []
