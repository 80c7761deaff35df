import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
application = get_asgi_application()

from django.conf import settings  # noqa: E402  (settings are ready only after the app)

if settings.INGESTION_IN_PROCESS and settings.INGESTION_AUTOSTART:
    # Embedded mode: no broker, so this server process also runs the ingestion loop.
    from streaming.ingestion import EmbeddedIngestion

    EmbeddedIngestion.ensure_started()
