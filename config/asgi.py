"""ASGI entry point: channels routes the live SSE feed to its own ASGI app (no thread per
open stream) and everything else to Django."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
django.setup(set_prefix=False)

from config.handler import SyncChainASGIHandler  # noqa: E402

django_application = SyncChainASGIHandler()

import gc  # noqa: E402

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402  (importable only once Django is set up)
from django.urls import re_path  # noqa: E402

from streaming import sse  # noqa: E402


# Everything loaded so far lives as long as the process: keep it out of the collector's
# scans, and collect young objects less often. Fanning a bar out to thousands of streams
# allocates heavily, and full collections were the p99 of delivery (bench/bench_sse.py).
gc.freeze()
gc.set_threshold(50_000, 50, 100)


application = ProtocolTypeRouter({
    "http": URLRouter([*sse.urlpatterns, re_path(r"", django_application)]),
})


if settings.INGESTION_IN_PROCESS and settings.INGESTION_AUTOSTART:
    # Embedded mode: no broker, so this server process also runs the ingestion loop.
    from streaming.ingestion import EmbeddedIngestion

    EmbeddedIngestion.serving = True
    EmbeddedIngestion.ensure_started()
