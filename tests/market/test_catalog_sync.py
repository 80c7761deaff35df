"""catalog_sync: the exchange's spot markets through ccxt, answered by a local server with
Binance's documented exchangeInfo format and Coinbase's recorded /products answer."""

import json
import threading
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from market.models import Exchange, Pair
from market.precision import Rounding
from market.services import asset_ensure

ROOT = Path(__file__).resolve().parents[2]
BINANCE_INFO = (ROOT / "tests/market/fixtures/binance_exchange_info.json").read_bytes()
COINBASE_PRODUCTS = (ROOT / "data/realdata/coinbase/COINBASE.0").read_text().splitlines()[0].split(": ", 1)[1].encode()


@pytest.fixture
def rest_server():
    asked = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append(self.path)
            path = self.path.split("?")[0]
            body = {"/api/v3/exchangeInfo": BINANCE_INFO, "/products": COINBASE_PRODUCTS}.get(path)
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body or b'{"message":"NotFound"}')

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    server.asked = asked
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield server
    server.shutdown()


@pytest.fixture
def exchanges(db, rest_server, settings):
    settings.BINANCE_REST_URL = settings.COINBASE_REST_URL = rest_server.url
    binance = Exchange.objects.create(slug="binance", name="Binance", source="exchange", ccxt_id="binance")
    coinbase = Exchange.objects.create(slug="coinbase", name="Coinbase", source="exchange", ccxt_id="coinbase")
    return binance, coinbase


def sync(slug, *extra):
    out = StringIO()
    call_command("catalog_sync", "--exchange", slug, *extra, stdout=out)
    return out.getvalue()


def test_binance_pairs_get_their_tick_step_minimum_and_status(exchanges, rest_server):
    sync("binance")
    assert [p.split("?")[0] for p in rest_server.asked] == ["/api/v3/exchangeInfo"]  # spot only
    btc = Pair.objects.get(exchange__slug="binance", base__symbol="BTC", quote__symbol="USDT")
    assert (btc.price_increment, btc.amount_increment, btc.min_amount) == (
        Decimal("0.01"), Decimal("0.00001"), Decimal("0.00001"))
    assert btc.trading_status == "trading"
    assert Pair.objects.get(base__symbol="ETH", quote__symbol="BTC").trading_status == "halted"


def test_coinbase_pairs_come_from_its_recorded_products_answer(exchanges):
    products = json.loads(COINBASE_PRODUCTS)
    sync("coinbase")
    skl = Pair.objects.get(exchange__slug="coinbase", base__symbol="SKL", quote__symbol="USD")
    recorded = next(p for p in products if p["id"] == "SKL-USD")
    assert skl.price_increment == Decimal(recorded["quote_increment"]).normalize()
    assert skl.amount_increment == Decimal(recorded["base_increment"]).normalize()
    assert skl.min_amount == Decimal(recorded["base_min_size"])
    assert Pair.objects.filter(exchange__slug="coinbase").count() == len(products)


def test_syncing_twice_changes_nothing_and_a_pair_gone_from_the_exchange_is_delisted(exchanges):
    stale = Pair.objects.create(exchange=exchanges[0], base=asset_ensure("LUNA"), quote=asset_ensure("USDT"))
    first = sync("binance")
    assert "3 pairs created" in first and "1 delisted" in first
    stale.refresh_from_db()
    assert stale.trading_status == "delisted" and not stale.streamable
    assert "0 pairs created, 0 updated, 3 unchanged, 0 delisted" in sync("binance")


def test_a_dry_run_writes_nothing(exchanges):
    assert "dry run" in sync("binance", "--dry-run")
    assert not Pair.objects.filter(exchange__slug="binance").exists()


def test_an_unknown_exchange_is_refused_with_the_known_ones(exchanges):
    with pytest.raises(CommandError, match="no exchange 'kraken' in the catalog .known: binance, coinbase"):
        sync("kraken")


def test_an_unreachable_exchange_is_a_clear_error(db, settings):
    settings.BINANCE_REST_URL = "http://127.0.0.1:9"  # nothing listens there
    Exchange.objects.create(slug="binance", name="Binance", source="exchange", ccxt_id="binance")
    with pytest.raises(CommandError, match="binance: .*(NetworkError|ExchangeNotAvailable|RequestTimeout)"):
        sync("binance")


def test_prices_and_quantities_are_served_at_the_synced_precision(exchanges):
    sync("binance")
    btc = Pair.objects.get(exchange__slug="binance", base__symbol="BTC", quote__symbol="USDT")
    assert isinstance(btc.rounding, Rounding) and btc.rounding.price_decimals == 2
    assert btc.rounding.row({"volume": 3.9175299999999997, "close": 61837.630000000005}) == {
        "volume": 3.91753, "close": 61837.63}
