from celery import shared_task


@shared_task(name="schemes.purge_events")
def purge_events() -> int:
    from config.clock import utcnow

    from .services import scheme_events_purge

    return scheme_events_purge(now_ms=int(utcnow().timestamp() * 1000))


@shared_task(name="schemes.event_partitions_upkeep")
def event_partitions_upkeep() -> None:
    from config.clock import utcnow

    from .services import scheme_event_partitions_upkeep

    scheme_event_partitions_upkeep(now_ms=int(utcnow().timestamp() * 1000))
