"""bench/bench_scale.py end to end on real processes, small: three live pairs for a short
window. The tool must measure what it claims (a lag for every second of the window, the
exchange's messages, the ingestion's CPU, SSE bars) and find nothing lost or doubled on a
run this small, then leave no process behind."""

import math
import os
import sys

import pytest
from django.conf import settings

from tests.integration.servers import ROOT, database_url_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

sys.path.insert(0, str(ROOT / "bench"))


def test_the_scale_benchmark_measures_three_live_pairs_and_cleans_up():
    import bench_scale

    seconds = 12
    result = bench_scale.measure(3, seconds, admin_url=database_url_for(settings.DATABASES["default"]),
                                 redis_url=settings.REDIS_URL, settle_s=2, log=lambda text: None)

    assert result.error == "" and result.never_live == 0
    assert len(result.live_s) == 3 and all(0 < s < 60 for s in result.live_s)
    assert len(result.lag_ms) >= 3 * (seconds - 2)  # every second of the window, every pair
    assert all(math.isfinite(lag) and -1000 < lag < 30_000 for lag in result.lag_ms)
    assert result.bars >= 3 * (seconds - 3)
    assert (result.missing, result.doubled_stored, result.doubled_sse) == (0, 0, 0)
    assert result.resyncs == 0 and result.trades_missed == 0  # the looping exchange's book never gaps
    assert result.messages / seconds > 3 * 50  # ~108 messages a second per pair from the recordings
    assert result.cpu["ingestion"] > 0 and 0 < result.per_message_us("ingestion") < 100_000
    assert result.cpu["exchange"] > 0 and result.cpu["web"] > 0
    assert result.sse_after_second_ms and result.sse_after_database_ms
    row = bench_scale.row_for(result)
    assert "us per exchange message" in row["comparison"] and row["met"] in (True, False)
    for group in result.process_groups:  # everything it started has ended
        with pytest.raises(ProcessLookupError):
            os.killpg(group, 0)
