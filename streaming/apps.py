from django.apps import AppConfig


class StreamingConfig(AppConfig):
    name = "streaming"

    def ready(self):
        from . import live

        live.connect()
