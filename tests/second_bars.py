"""Second bars as stored, in both tiers (rows and minute packs, market/bar_pack.py), for
tests that check the store itself: a second stored twice is returned twice."""

from market import bar_pack
from market.bars import BAR_FIELDS
from market.models import SecondBar, SecondBarPack

NO_END = 1 << 62


def stored_seconds(pair, start: int = 0, end: int = NO_END, columns: tuple[str, ...] = BAR_FIELDS) -> list[tuple]:
    """The pair's stored second bars in [start, end) as tuples of the columns, time order."""
    at = columns.index("ts_ms")
    rows = list(SecondBar.objects.filter(pair=pair, ts_ms__gte=start, ts_ms__lt=end).values_list(*columns))
    packs = SecondBarPack.objects.filter(pair=pair, minute_ts_ms__gt=start - bar_pack.MINUTE_MS, minute_ts_ms__lt=end)
    for minute, seconds, data in packs.values_list("minute_ts_ms", "seconds", "data"):
        rows += [row for row in bar_pack.decode(minute, seconds, bytes(data), columns) if start <= row[at] < end]
    return sorted(rows, key=lambda row: row[at])


def first_second(pair) -> int | None:
    stamps = stored_seconds(pair, columns=("ts_ms",))
    return stamps[0][0] if stamps else None


def seconds_delete(pair) -> None:
    SecondBar.objects.filter(pair=pair).delete()
    SecondBarPack.objects.filter(pair=pair).delete()
