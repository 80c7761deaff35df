"""The service's one clock: every "now" the service reads comes from here, so a test can
move it (across a month boundary, past a heartbeat's age)."""

from datetime import datetime

from django.utils import timezone


def utcnow() -> datetime:
    return timezone.now()


def now_ms() -> int:
    """Now in epoch milliseconds, the unit of every timestamp on the wire."""
    return int(utcnow().timestamp() * 1000)
