from django.core.management.base import BaseCommand, CommandError

from accounts.models import Account
from accounts.services import account_upsert
from billing.models import Plan


class Command(BaseCommand):
    help = "Create or update a customer user and its account."

    def add_arguments(self, parser):
        parser.add_argument("email")
        parser.add_argument("--plan", required=True)
        parser.add_argument("--password")
        parser.add_argument("--payment", choices=[c for c, _ in Account.Payment.choices])

    def handle(self, *args, email, plan, password, payment, **opts):
        plan_row = Plan.objects.filter(name=plan).first()
        if plan_row is None:
            known = ", ".join(Plan.objects.values_list("name", flat=True)) or "none"
            raise CommandError(f"No plan named {plan!r} (known: {known}).")
        if "@" not in email:
            raise CommandError(f"{email!r} is not an email address.")
        user = account_upsert(email=email, plan=plan_row, password=password, payment=payment)
        self.stdout.write(f"account {user.email}: plan={user.account.plan.name} "
                          f"payment={user.account.payment}")
