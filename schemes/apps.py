from django.apps import AppConfig


class SchemesConfig(AppConfig):
    name = "schemes"
