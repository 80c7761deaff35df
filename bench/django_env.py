"""Django set up for a benchmark: its own database (a temporary SQLite file unless
BENCH_DATABASE_URL is set) migrated from scratch, and the production argon2 parameters."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def setup(settings_module: str = "config.settings.local") -> None:
    sys.path.insert(0, str(ROOT))
    if "BENCH_DATABASE_URL" in os.environ:
        os.environ["DATABASE_URL"] = os.environ["BENCH_DATABASE_URL"]
    else:
        os.environ["DATABASE_URL"] = f"sqlite:///{tempfile.mkdtemp(prefix='bench-')}/bench.sqlite3"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", settings_module)
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)


def setup_without_database(settings_module: str = "config.settings.test") -> None:
    """Django set up for a benchmark that times code in one process and touches no
    database or Redis (the embedded test settings, with any DATABASE_URL / REDIS_URL dropped)."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", settings_module)
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    import django

    django.setup()
