"""ASGI entry point: channels routes the live SSE feed to its own ASGI app (no thread per
open stream) and everything else to Django."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
django.setup(set_prefix=False)

from config.handler import SyncChainASGIHandler  # noqa: E402

django_application = SyncChainASGIHandler()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402  (importable only once Django is set up)
from django.urls import re_path  # noqa: E402

from config.collector import collect_less_often  # noqa: E402
from streaming import sse  # noqa: E402


collect_less_often()  # after everything that lives as long as the process is loaded


def _daphne_requests_skip_form_parsing() -> None:
    """Twisted parses every POST's Content-Type with the `email` package and, for a form,
    its body into `request.args`, which daphne never reads (it hands the raw body to ASGI and
    Django parses it): 0.25 ms of a counted POST's CPU (docs/DECISIONS.md). Twisted's
    Request takes `parsePOSTFormSubmission=False` for this; daphne builds its requests from
    the module's `WebRequest`, so that name gets a subclass that passes it."""
    try:
        from daphne import http_protocol
    except ImportError:  # served by another ASGI server
        return
    if getattr(http_protocol.WebRequest, "skips_form_parsing", False):
        return

    class WebRequest(http_protocol.WebRequest):
        skips_form_parsing = True

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs, parsePOSTFormSubmission=False)

    http_protocol.WebRequest = WebRequest


_daphne_requests_skip_form_parsing()

application = ProtocolTypeRouter({
    "http": URLRouter([*sse.urlpatterns, re_path(r"", django_application)]),
})


if settings.INGESTION_IN_PROCESS and settings.INGESTION_AUTOSTART:
    # Embedded mode: no broker, so this server process also runs the ingestion loop.
    from streaming.ingestion import EmbeddedIngestion

    EmbeddedIngestion.serving = True
    EmbeddedIngestion.ensure_started()
