import sys

from django.core.management.base import BaseCommand, CommandError

from accounts.models import ApiKey, User
from accounts.services import KeyCapReached, api_key_create, api_key_revoke


class Command(BaseCommand):
    help = ("apikey EMAIL --name NAME prints a new key (its only stdout line); "
            "apikey EMAIL --revoke LOOKUP_ID revokes one.")

    def add_arguments(self, parser):
        parser.add_argument("email")
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument("--name")
        group.add_argument("--revoke", metavar="LOOKUP_ID")

    def handle(self, *args, email, name, revoke, **opts):
        user = User.objects.select_related("account").filter(email=email.strip().lower()).first()
        if user is None or user.account is None:
            raise CommandError(f"No customer account for {email!r}.")
        if revoke:
            lookup_id = revoke.removeprefix("mdp_live_").rstrip("…")[:12]
            api_key = ApiKey.objects.filter(account=user.account, lookup_id=lookup_id).first()
            if api_key is None:
                raise CommandError(f"No key {revoke!r} on {email}.")
            api_key_revoke(api_key=api_key, via=ApiKey.RevokedVia.COMMAND)
            self.stderr.write(f"revoked {api_key.display}")
            return
        try:
            created = api_key_create(account=user.account, name=name)
        except (KeyCapReached, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        sys.stdout.write(created.plaintext + "\n")
        sys.stdout.flush()
