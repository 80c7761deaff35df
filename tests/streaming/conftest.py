import pytest

from market.services import catalog_seed_demo


@pytest.fixture
def catalog(db):
    return {p.path: p for p in catalog_seed_demo()}


@pytest.fixture
def btc(catalog):
    return catalog["binance/BTC/USDT"]
