"""Periodic market tasks (Celery beat in full mode)."""

from celery import shared_task

from . import services


@shared_task(name="market.refresh_rankings", autoretry_for=(Exception,), retry_backoff=60, max_retries=5)
def refresh_rankings() -> int:
    return services.rankings_refresh()


@shared_task(name="market.purge_bars")
def purge_bars() -> dict:
    from .services import bars_purge
    from config.clock import utcnow

    return bars_purge(now_ms=int(utcnow().timestamp() * 1000))


@shared_task(name="market.bar_partitions_upkeep")
def bar_partitions_upkeep() -> None:
    from .services import bar_partitions_upkeep
    from config.clock import utcnow

    bar_partitions_upkeep(now_ms=int(utcnow().timestamp() * 1000))
