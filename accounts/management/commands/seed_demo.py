from django.core.management.base import BaseCommand

from accounts.models import ApiKey, User
from accounts.services import KeyCapReached, account_upsert, api_key_create, api_key_revoke
from billing.models import Plan
from billing.services import plans_seed_defaults

DEMO_EMAIL = "demo@example.com"
DEMO_PASSWORD = "demo-password"
DEMO_KEY_NAME = "demo key (seed_demo)"
STAFF_EMAIL = "admin@example.com"
STAFF_PASSWORD = "admin-password"


class Command(BaseCommand):
    help = ("Seed the demo: plans, a Pro demo account, a staff user and a fresh demo key. "
            "Safe to run again: the previous demo key is revoked and a new one printed.")

    def add_arguments(self, parser):
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")

    def handle(self, *args, base_url, **opts):
        plans_seed_defaults()
        user = User.objects.filter(email=DEMO_EMAIL).first()
        if user is None:
            user = account_upsert(email=DEMO_EMAIL, plan=Plan.objects.get(name="pro"),
                                  password=DEMO_PASSWORD, account_name="Demo Quant Team")
        if not User.objects.filter(email=STAFF_EMAIL).exists():
            User.objects.create_superuser(email=STAFF_EMAIL, password=STAFF_PASSWORD)
        for old in ApiKey.objects.filter(account=user.account, name=DEMO_KEY_NAME, revoked_at__isnull=True):
            api_key_revoke(api_key=old)
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
