import pytest

from market.services import catalog_seed_demo


@pytest.fixture
def btc(db):
    return next(p for p in catalog_seed_demo() if p.path == "binance/BTC/USDT")
