"""GET /healthz: 200 once the service can serve, 503 naming the failing check."""

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.http import JsonResponse


def _check_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _check_cache() -> None:
    cache.set("healthz", "ok", timeout=10)
    if cache.get("healthz") != "ok":
        raise RuntimeError("cache did not return what was written")


def _check_pubsub() -> None:
    if settings.REDIS_URL:
        from config.redis import client

        client().ping()


def _check_ingestion() -> None:
    """Wanted pairs whose ingestion stopped committing for longer than the FAILED threshold."""
    from datetime import timedelta

    from django.utils import timezone

    from streaming.models import IngestionState

    cutoff = timezone.now() - timedelta(seconds=settings.STREAM_FAILED_AFTER_SECONDS)
    stalled = IngestionState.objects.filter(wanted=True, fatal=False, heartbeat_at__lt=cutoff).count()
    if stalled:
        raise RuntimeError(f"{stalled} subscribed pair(s) without an ingestion heartbeat for "
                           f"{settings.STREAM_FAILED_AFTER_SECONDS} s")


CHECKS = {"database": _check_database, "cache": _check_cache, "pubsub": _check_pubsub,
          "ingestion": _check_ingestion}


def healthz(request):
    results, healthy = {}, True
    for name, check in CHECKS.items():
        try:
            check()
            results[name] = "ok"
        except Exception as exc:  # any failure is the answer, not a 500
            results[name] = f"failing: {exc.__class__.__name__}: {exc}"[:300]
            healthy = False
    body = {"status": "ok" if healthy else "degraded", "mode": "full" if settings.REDIS_URL else "embedded",
            "checks": results}
    return JsonResponse(body, status=200 if healthy else 503)
