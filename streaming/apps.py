from django.apps import AppConfig


class StreamingConfig(AppConfig):
    name = "streaming"

    def ready(self):
        from billing.usage import streamed_pairs_table_install

        from . import receivers  # noqa: F401  publishes what the apps below it announce
        from .models import StreamSubscription

        # /me/usage (billing, below this app) counts the pairs an account streams here
        streamed_pairs_table_install(StreamSubscription._meta.db_table)
