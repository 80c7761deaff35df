"""Turn an exchange's raw recorded frames into our replay format, through the same codec
the live feed uses (so a recording replays exactly as the live path would have seen it)."""

from django.core.management.base import BaseCommand, CommandError

from market.sources.events import PairRef
from market.sources.replay import write_jsonl


class Command(BaseCommand):
    help = ("Convert a raw recording (Binance combined-stream lines '<recv ns> <json>' with a REST depth "
            "snapshot, or a Coinbase websocket capture) to a replay file.")

    def add_arguments(self, parser):
        parser.add_argument("source", help="The raw recording (plain or .gz)")
        parser.add_argument("target", help="Replay file to write (.jsonl or .jsonl.gz)")
        parser.add_argument("--venue", required=True, choices=["binance", "coinbase"])
        parser.add_argument("--symbol", required=True, help="The venue's symbol: BTCUSDT, SKL-USD")
        parser.add_argument("--pair", required=True, help="Our pair: exchange/BASE/QUOTE, e.g. binance/BTC/USDT")

    def handle(self, *args, source, target, venue, symbol, pair, **opts):
        from market.sources import venues

        parts = pair.split("/")
        if len(parts) != 3 or not all(parts):
            raise CommandError("--pair must be exchange/BASE/QUOTE, e.g. binance/BTC/USDT")
        ref = PairRef(parts[0].lower(), parts[1].upper(), parts[2].upper())
        events = (venues.binance_recording_events(source, symbol) if venue == "binance"
                  else venues.coinbase_recording_events(source, symbol))
        try:
            # a replay file is in time order; streams interleave a little (sorted is stable:
            # equal times keep arrival order, as the live feed's windows do)
            written = write_jsonl(sorted(events, key=lambda event: event.ts_ms), ref, target)
        except (OSError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        if not written:
            raise CommandError(f"no events of {symbol} in {source}")
        self.stdout.write(f"{written} events of {symbol} written to {target}")
