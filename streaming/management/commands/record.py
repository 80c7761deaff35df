"""Capture a live exchange session in our replay format (docs/REPLAY_FORMAT.md)."""

import time

from django.core.management.base import BaseCommand, CommandError

from market.sources.events import PairRef
from market.sources.exchange import SourceFatalError
from market.sources.replay import write_jsonl


class Command(BaseCommand):
    help = ("Record a live exchange session (trades, the exact book, best bid/ask) to a replay file "
            "(.jsonl or .jsonl.gz). Needs the exchange reachable (or BINANCE_WS_URL / COINBASE_WS_URL ...).")

    def add_arguments(self, parser):
        parser.add_argument("path", help="Replay file to write (appended to when it exists)")
        parser.add_argument("--exchange", required=True, help="binance, coinbase or another ccxt exchange id")
        parser.add_argument("--pair", required=True, help="BASE/QUOTE, e.g. BTC/USDT")
        parser.add_argument("--minutes", type=float, required=True)

    def handle(self, *args, path, exchange, pair, minutes, **opts):
        from streaming.feeds import FeedRunner, LiveExchangeSource

        base, sep, quote = pair.upper().partition("/")
        if not sep or not base or not quote:
            raise CommandError("--pair must be BASE/QUOTE, e.g. BTC/USDT")
        if minutes <= 0:
            raise CommandError("--minutes must be positive")
        ref = PairRef(exchange.lower(), base, quote)
        source = LiveExchangeSource(exchange.lower())
        deadline = time.monotonic() + minutes * 60
        cursor, written = None, 0
        try:
            while True:
                finished = time.monotonic() >= deadline
                if not finished:
                    time.sleep(1.0)
                end = source.window_end(ref, int(time.time() * 1000))
                if end is not None:
                    if finished:  # the last events: everything buffered
                        end = (source.feed(ref).last_event_ms or end) + 1
                    cursor = source.earliest_ms(ref) if cursor is None else cursor
                    if end > cursor:
                        written += write_jsonl(source.events(ref, cursor, end), ref, path, append=True)
                        source.trim_before(ref, end)
                        cursor = end
                if finished:
                    break
        except SourceFatalError as exc:
            raise CommandError(exc.reason) from exc
        finally:
            signals = source.feed(ref).signals() if cursor is not None else {}
            FeedRunner.shutdown()
        self.stdout.write(f"{written} events of {ref.exchange} {base}/{quote} written to {path}"
                          + (f" (feed: {signals})" if signals else ""))
