"""The API explorer with the signed-in customer's keys to choose from: wiring, as it needs
the accounts app, which config/api (the layer below every app) must not import."""

from accounts.selectors import api_keys_live
from config.api.views import ExplorerView


class CustomerExplorerView(ExplorerView):
    def keys_of(self, user) -> list:
        account = getattr(user, "account", None)
        if account is None:
            return []
        return [{"name": key.name, "lookup_id": key.lookup_id, "display": key.display}
                for key in api_keys_live(account=account)]
