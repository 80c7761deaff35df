"""Synthesise a large bar history (second, minute, hour and day bars) for many pairs."""

import time

from django.core.management.base import BaseCommand, CommandError

from config import clock
from market.bars import floor_ms
from market.services import history_synthesize, synthetic_pairs_ensure


class Command(BaseCommand):
    help = ("Synthesise bar history for N pairs on the exchange 'synthetic' (SYN001-USDT ...): second bars "
            "for the last --second-days days with their minute and hour roll-ups, hour bars back to "
            "--hour-days days, day bars rolled up from the hours; a random walk with trades, book and quotes "
            "consistent with each other. Replaces those pairs' bars in the range; PostgreSQL by binary COPY. "
            "200 pairs x 3 second days is 51.8 million second bars (~19 GB).")

    def add_arguments(self, parser):
        parser.add_argument("--pairs", type=int, default=200, help="How many pairs (default 200)")
        parser.add_argument("--second-days", type=int, default=1, help="Days of second bars (default 1)")
        parser.add_argument("--hour-days", type=int, default=31,
                            help="Days of hour bars, the second days included (default 31)")
        parser.add_argument("--end-ms", type=int, default=None,
                            help="Where the history ends, epoch ms (default: the start of the current hour)")
        parser.add_argument("--seed", type=int, default=0, help="Same seed, same bars (default 0)")

    def handle(self, *args, pairs, second_days, hour_days, end_ms, seed, verbosity, **opts):
        from django.db import connection

        if pairs < 1 or pairs > 999 or second_days < 0 or hour_days < 0:
            raise CommandError("--pairs takes 1..999; --second-days and --hour-days take 0 or more")
        if connection.vendor != "postgresql" and pairs * second_days > 2:
            raise CommandError("without PostgreSQL the history is written row by row: at most 2 pair-days "
                               "of second bars (--pairs x --second-days)")
        end_ms = floor_ms(clock.now_ms() if end_ms is None else end_ms, "hour")
        started = time.perf_counter()
        written = {"second": 0, "minute": 0, "hour": 0, "day": 0}
        for index, (pair, prof) in enumerate(synthetic_pairs_ensure(count=pairs, seed=seed)):
            counts = history_synthesize(pair=pair, prof=prof, index=index, seed=seed, end_ms=end_ms,
                                        second_days=second_days, hour_days=hour_days)
            for granularity, count in counts.items():
                written[granularity] += count
            if verbosity > 1 or (verbosity and (index + 1) % 10 == 0):
                elapsed = time.perf_counter() - started
                self.stdout.write(f"  {index + 1}/{pairs} pairs, {sum(written.values()):,} bars, {elapsed:.0f} s")
        elapsed = time.perf_counter() - started
        total = sum(written.values())
        if verbosity:
            self.stdout.write(f"{pairs} pairs to {end_ms}: {written['second']:,} second, {written['minute']:,} minute, "
                              f"{written['hour']:,} hour, {written['day']:,} day bars in {elapsed:.1f} s "
                              f"({total / elapsed:,.0f} bars/s)")
