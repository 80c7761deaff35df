from django.apps import AppConfig


class SchemesConfig(AppConfig):
    name = "schemes"
    verbose_name = "Spoofing scheme detection"

    def ready(self):
        from streaming.publish import scheme_replayers

        from .selectors import scheme_events_since

        scheme_replayers.append(scheme_events_since)
