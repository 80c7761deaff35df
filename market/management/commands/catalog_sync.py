"""Record an exchange's spot markets (tick, step, minimum size, trading status)."""

from django.core.management.base import BaseCommand, CommandError

from market.catalog import CatalogError, catalog_sync, exchange_markets
from market.models import Exchange


class Command(BaseCommand):
    help = ("Load an exchange's spot markets through ccxt and record each pair's price and amount "
            "increments, minimum size and trading status; pairs no longer listed become delisted.")

    def add_arguments(self, parser):
        parser.add_argument("--exchange", required=True, help="Our exchange slug, e.g. binance or coinbase")
        parser.add_argument("--quote", action="append", default=[], help="Only pairs quoted in this asset")
        parser.add_argument("--dry-run", action="store_true", help="Report without writing")

    def handle(self, *args, exchange, quote, dry_run, **opts):
        from django.db import transaction

        found = Exchange.objects.filter(slug=exchange.lower()).first()
        if found is None:
            known = ", ".join(Exchange.objects.values_list("slug", flat=True)) or "none"
            raise CommandError(f"no exchange {exchange!r} in the catalog (known: {known})")
        try:
            markets = exchange_markets(found)
        except CatalogError as exc:
            raise CommandError(str(exc)) from exc
        with transaction.atomic():
            result = catalog_sync(exchange=found, markets=markets, quotes={q.upper() for q in quote} or None)
            if dry_run:
                transaction.set_rollback(True)
        self.stdout.write(f"{found.slug}: {len(markets)} spot markets; {len(result.created)} pairs created, "
                          f"{len(result.updated)} updated, {result.unchanged} unchanged, "
                          f"{len(result.delisted)} delisted" + (" (dry run: nothing written)" if dry_run else ""))
