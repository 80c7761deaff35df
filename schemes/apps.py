from django.apps import AppConfig


class SchemesConfig(AppConfig):
    name = "schemes"
    verbose_name = "Spoofing scheme detection"

