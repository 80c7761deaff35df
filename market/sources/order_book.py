"""One side of a price-level order book, the one way every part of the service keeps one:
a dict of quantity by price and, where the order matters (the bar builder, the simulator,
the detectors' book tracker), the prices in a list kept sorted ascending, so the best level
is an end of the list and a level's rank is a bisect; readers that only look levels up
(netting, flow statistics, the exchange adapter's book state) keep the dict alone. Plain
Python, no Django.

A quantity of zero or less removes the level; a stored level is never zero."""

from __future__ import annotations

from bisect import bisect_left, insort


def side_from_levels(levels) -> tuple[dict, list]:
    """(quantity by price, sorted prices) of a snapshot's (price, qty) levels."""
    book = {price: qty for price, qty in levels if qty > 0}
    return book, sorted(book)


def levels_apply(book: dict, levels) -> None:
    """Apply (price, qty) levels to a side kept as a dict alone (no sorted prices: for
    readers that only look up levels or take an extreme now and then)."""
    for price, qty in levels:
        if qty > 0:
            book[price] = qty
        else:
            book.pop(price, None)


def level_set(book: dict, prices: list, price, qty):
    """Set one level (qty <= 0 removes it); returns the quantity it had (0 when absent)."""
    old = book.get(price, 0)
    if qty > 0:
        if not old:
            insort(prices, price)
        book[price] = qty
    elif old:
        del book[price]
        del prices[bisect_left(prices, price)]
    return old
