from django.conf import settings
from django.core.management.base import BaseCommand
from django.utils import timezone

from accounts.models import ApiKey, User
from accounts.services import KeyCapReached, account_upsert, api_key_create, api_key_revoke
from billing.models import Plan
from billing.services import plans_seed_defaults
from market.services import catalog_seed_demo, history_seed

DEMO_EMAIL = "demo@example.com"
DEMO_PASSWORD = "demo-password"
DEMO_KEY_NAME = "demo key (seed_demo)"
STAFF_EMAIL = "admin@example.com"
STAFF_PASSWORD = "admin-password"
DEMO_STREAMS = ("binance/BTC/USDT", "coinbase/ETH/USD")


class Command(BaseCommand):
    help = ("Seed the demo: plans, a Pro demo account, a staff user and a fresh demo key. "
            "Safe to run again: the previous demo key is revoked and a new one printed.")

    def add_arguments(self, parser):
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")
        parser.add_argument("--history-days", type=int, default=365,
                            help="Days of hourly and daily history for the simulated pairs (0: none)")
        parser.add_argument("--live", action="append", default=[], metavar="EXCHANGE",
                            help="Feed this exchange's pairs from the exchange itself (binance, coinbase; "
                                 "needs the internet)")
        parser.add_argument("--recording", action="append", default=[], metavar="EXCHANGE=PATH",
                            help="Feed this exchange's pairs from a replay recording played in a loop from now")

    def handle(self, *args, base_url, history_days, live, recording, **opts):
        plans_seed_defaults()
        pairs = catalog_seed_demo()
        self._set_sources(live, recording)
        if history_days:
            started = timezone.now()
            written = history_seed(pairs=pairs, days=history_days, seed=settings.SIMULATOR_SEED,
                                   now_ms=int(started.timestamp() * 1000))
            if written:
                seconds = (timezone.now() - started).total_seconds()
                self.stdout.write(f"  History:  {written} hourly bars for {len(pairs)} simulated pairs "
                                  f"({seconds:.0f} s)")
        user = User.objects.filter(email=DEMO_EMAIL).first()
        if user is None:
            user = account_upsert(email=DEMO_EMAIL, plan=Plan.objects.get(name="pro"),
                                  password=DEMO_PASSWORD, account_name="Demo Quant Team")
        if not User.objects.filter(email=STAFF_EMAIL).exists():
            User.objects.create_superuser(email=STAFF_EMAIL, password=STAFF_PASSWORD)
        self._subscribe_demo(user.account, pairs)
        for old in ApiKey.objects.filter(account=user.account, name=DEMO_KEY_NAME, revoked_at__isnull=True):
            api_key_revoke(api_key=old, via=ApiKey.RevokedVia.DEMO_SEED)
        try:
            plaintext = api_key_create(account=user.account, name=DEMO_KEY_NAME).plaintext
        except KeyCapReached:
            plaintext = None
        self.stdout.write("")
        self.stdout.write(f"  Web:      sign in as {DEMO_EMAIL} / {DEMO_PASSWORD}")
        self.stdout.write(f"  Admin:    /admin/ as {STAFF_EMAIL} / {STAFF_PASSWORD}")
        if plaintext:
            self.stdout.write(f"  Demo key: {plaintext}")
            self.stdout.write(f'  Try:      curl -H "Authorization: Bearer {plaintext}" '
                              f"{base_url}/api/v1/me/usage")
        else:
            self.stdout.write("  Demo key: the demo account holds two other keys; revoke one on the "
                              "API keys page and run seed_demo again.")
        self.stdout.write("")

    def _set_sources(self, live, recordings):
        """Where each exchange's data comes from (the simulator unless told otherwise)."""
        from pathlib import Path

        from django.core.management.base import CommandError

        from market.models import Exchange
        from streaming.models import BookCheckpoint, IngestionState

        changes = {slug: {"source": Exchange.Source.EXCHANGE, "ccxt_id": slug, "replay_loop_from_ms": None}
                   for slug in live}
        if not live and not recordings:  # a plain demo: recordings played by an earlier run stop
            for slug in Exchange.objects.filter(replay_loop_from_ms__isnull=False).values_list("slug", flat=True):
                changes[slug] = {"source": Exchange.Source.SIMULATOR, "replay_loop_from_ms": None}
        for text in recordings:
            slug, sep, path = text.partition("=")
            if not sep or not Path(path).exists():
                raise CommandError(f"--recording takes EXCHANGE=PATH of an existing recording, got {text!r}")
            changes[slug] = {"source": Exchange.Source.REPLAY, "replay_path": str(Path(path).resolve()),
                             "replay_loop_from_ms": int(timezone.now().timestamp() * 1000)}
        for slug, fields in changes.items():
            if not Exchange.objects.filter(slug=slug).update(**fields):
                raise CommandError(f"no exchange {slug!r} in the catalog")
            # the pairs start over from their new source's data
            IngestionState.objects.filter(pair__exchange__slug=slug).update(
                cursor_ms=None, coverage_from_ms=None, gaps=[], feed={}, fatal=False, last_error="")
            BookCheckpoint.objects.filter(pair__exchange__slug=slug).delete()
            self.stdout.write(f"  Source:   {slug} <- {fields['source']} "
                              f"{fields.get('replay_path', '')}".rstrip())

    @staticmethod
    def _subscribe_demo(account, pairs):
        """The demo account streams two pairs, so the Live page has data at once."""
        from streaming.models import StreamSubscription
        from streaming.services import subscription_upsert

        if StreamSubscription.objects.filter(account=account).exists():
            return
        for pair in pairs:
            if pair.path in DEMO_STREAMS:
                subscription_upsert(account=account, pair=pair, metrics=["trade", "book", "quote"])
