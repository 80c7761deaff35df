import os

from celery import Celery
from celery.signals import worker_ready

from config.collector import collect_less_often

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("marketdata")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _collect_less_often(**_kwargs) -> None:
    """The worker runs ingestion for its whole life (streaming.tasks)."""
    collect_less_often()
