"""The one clock billing reads, so tests can move it across a month boundary."""

from datetime import datetime

from django.utils import timezone


def utcnow() -> datetime:
    return timezone.now()
