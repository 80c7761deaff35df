"""Evaluate the spoofing scheme detectors and write docs/DETECTION_EVALUATION.md.

    python bench/evaluate_detectors.py                  # everything below, ~4 min on 2 cores
    python bench/evaluate_detectors.py --seeds 101 102 103 --hours 2 --batches 0 100

Four parts, one document:

1. Real recordings (data/realdata/binance-spot, BTCUSDT and ETHUSDT): each recording is
   imported into the replay format and ingested by the service's own ingestion
   (`PairIngestor` on a scratch SQLite database, detection on, Binance's 100 ms depth
   batching), in fresh processes with different PYTHONHASHSEED values. Every stored
   scheme event is listed with its fields; the runs must agree.
2. Flow: the same measurements (`market.sources.flow_stats.flow_profile`) on the real
   recordings and on the simulator, per event and netted as Binance nets (100 ms).
3. Held-out simulator seeds (thresholds were tuned on seeds 1-50 and checked on 51-100
   only), per event and with the depth feed netted into batches (`--batches`).
4. The second market (market/sources/second_market, written from DETECTION.md alone by
   someone who had read neither the simulator nor the detectors), per pair class (sparse
   high-priced books, dense truncated low-priced ones) and per feed, on held-out seeds."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RECORDINGS = {"BTC": ROOT / "data/realdata/binance-spot/btcusdt_20240808.gz",
              "ETH": ROOT / "data/realdata/binance-spot/ethusdt_20240808.gz"}
HASH_SEEDS = (0, 1, 2)
FLOW_SEED = 101
FLOW_START_MS = 1_717_419_600_000  # the held-out evaluation's first hour (2024-06-03 13:00 UTC)
FLOW_MINUTES = 10
# the second market's pair classes (market/sources/second_market/profiles.py) and its held-out seeds
SECOND_MARKET_PAIRS = {"sparse": "binance/BTC/USDT,coinbase/BTC/USD".split(","),
                       "dense": "binance/XRP/USDT,binance/DOGE/USDT".split(",")}
SECOND_MARKET_CLASSES = {"sparse": "high-priced pairs with a sparse 50-level book (tick 0.1)",
                         "dense": "low-priced pairs with a dense book truncated to 25 levels (tick 0.0001)"}
SECOND_MARKET_SEEDS = (9001, 9002, 9003)


def ingest_recording(base: str) -> dict:
    """In this process: ingest one recording with detection on; what was stored."""
    from bench import django_env

    os.environ["SCHEMES_DETECTION"] = "true"
    django_env.setup()
    import tempfile

    from django.conf import settings

    from market.models import Exchange, Pair
    from market.services import asset_ensure
    from market.sources.events import PairRef
    from market.sources.replay import write_jsonl
    from market.sources.venues import binance_recording_events
    from schemes.models import DetectorCheckpoint, SchemeEvent
    from streaming.ingestion import ingestion_want
    from streaming.ingestor import PairIngestor

    settings.SCHEMES_DETECTION = True
    folder = Path(tempfile.mkdtemp(prefix="recording-"))
    ref = PairRef("binance", base, "USDT")
    events = sorted(binance_recording_events(RECORDINGS[base], f"{base}USDT"), key=lambda e: e.ts_ms)
    write_jsonl(events, ref, folder / f"{base.lower()}usdt.jsonl.gz")
    exchange = Exchange.objects.create(slug="binance", name="Binance", source=Exchange.Source.REPLAY,
                                       replay_path=str(folder))
    pair = Pair.objects.create(exchange=exchange, base=asset_ensure(base), quote=asset_ensure("USDT"))
    ingestion_want(pair=pair)
    ingestor = PairIngestor(pair)
    started = time.perf_counter()
    while ingestor.step(2_000_000_000_000) is not None:
        pass
    seconds = time.perf_counter() - started
    found = [row.as_dict() for row in SchemeEvent.objects.filter(pair=pair).order_by("ts_ms", "scheme", "side")]
    return {"pair": f"binance/{base}/USDT", "span_ms": events[-1].ts_ms - events[0].ts_ms, "events": len(events),
            "book_updates": sum(len(getattr(e, "bids", ())) + len(getattr(e, "asks", ())) for e in events),
            "ingest_seconds": round(seconds, 2), "scheme_events": found,
            "detector_checkpoint_ms": DetectorCheckpoint.objects.filter(pair=pair).values_list("cursor_ms", flat=True).first()}


def real_recordings() -> list[dict]:
    """Each recording ingested once per hash seed, in its own process."""
    out = []
    for base in RECORDINGS:
        runs = {}
        for seed in HASH_SEEDS:
            env = {**os.environ, "PYTHONHASHSEED": str(seed)}
            env.pop("DATABASE_URL", None)
            done = subprocess.run([sys.executable, __file__, "--ingest-recording", base], capture_output=True,
                                  env=env, cwd=ROOT, timeout=1800)
            if done.returncode:
                raise SystemExit(done.stderr.decode())
            runs[seed] = json.loads(done.stdout.decode().strip().splitlines()[-1])
        first = runs[HASH_SEEDS[0]]
        same = all(json.dumps(r["scheme_events"], sort_keys=True) == json.dumps(first["scheme_events"], sort_keys=True)
                   for r in runs.values())
        out.append({**first, "hash_seeds": list(HASH_SEEDS), "identical_across_hash_seeds": same})
    return out


def flow_rows() -> list[tuple[str, dict]]:
    from market.sources.events import PairRef
    from market.sources.flow_stats import flow_profile
    from market.sources.netting import net_depth
    from market.sources.simulator import SimulatorSource
    from market.sources.venues import binance_recording_events

    rows = []
    for base, path in RECORDINGS.items():
        events = sorted(binance_recording_events(path, f"{base}USDT"), key=lambda e: e.ts_ms)
        rows.append((f"real {base}USDT (Binance, 100 ms depth)", flow_profile(events)))
        source = SimulatorSource(FLOW_SEED)
        simulated = list(source.events(PairRef("binance", base, "USDT"), FLOW_START_MS,
                                       FLOW_START_MS + FLOW_MINUTES * 60_000))
        rows.append((f"simulator {base}/USDT, per event", flow_profile(simulated)))
        rows.append((f"simulator {base}/USDT, netted 100 ms", flow_profile(net_depth(simulated, 100))))
    return rows


def flow_table(rows) -> str:
    cols = [("trades/s", "trades_per_s"), ("trade qty p50", "trade_qty_median"),
            ("taker qty/s p50", "taker_qty_per_s_median"), ("depth msgs/s", "depth_messages_per_s"),
            ("level updates/s", "level_updates_per_s"), ("within 10 bps/s", "near_level_updates_per_s"),
            ("levels/msg p50", "levels_per_message_p50"), ("levels/msg p90", "levels_per_message_p90"),
            ("msgs >= 10 levels", "messages_with_10_levels_share"), ("spread bps", "spread_bps_median"),
            ("mid still 1 s", "mid_still_share"), ("mid 1 s move p90 bps", "mid_move_bps_p90"),
            ("touch qty p50", None), ("5th level qty p50", None), ("top-10 depth p50", "depth10_median"),
            ("top-10 p10 / p50", "depth10_p10_of_median"), ("top-10 p90 / p50", "depth10_p90_of_median")]
    lines = ["| stream | " + " | ".join(c for c, _ in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, prof in rows:
        cells = []
        for label, key in cols:
            if key is None:
                value = prof["level_qty_median"][0 if label.startswith("touch") else 4]
            else:
                value = prof[key]
            cells.append(f"{value:g}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def real_section(results: list[dict]) -> list[str]:
    lines = []
    total_hours = sum(r["span_ms"] for r in results) / 3_600_000
    total_events = sum(len(r["scheme_events"]) for r in results)
    lines.append(f"{total_events} scheme events in {total_hours:.3f} pair-hours "
                 f"({total_events / total_hours:.2f} per pair-hour; target at most 1).")
    lines.append("")
    lines.append("| recording | span | events | book updates | ingestion time | "
                 "book updates/s (ingestion with detection, one core) | scheme events | the same with "
                 "PYTHONHASHSEED " + ", ".join(map(str, HASH_SEEDS)) + " |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for r in results:
        lines.append(f"| {r['pair']} | {r['span_ms'] / 1000:.0f} s | {r['events']:,} | {r['book_updates']:,} | "
                     f"{r['ingest_seconds']} s | {r['book_updates'] / r['ingest_seconds']:,.0f} | "
                     f"{len(r['scheme_events'])} | "
                     f"{'yes' if r['identical_across_hash_seeds'] else 'NO'} |")
    for r in results:
        for item in r["scheme_events"]:
            lines.append("")
            lines.append(f"* {r['pair']} {item['scheme']} {item['side']} at {item['ts_ms']}: "
                         f"`{json.dumps(item, sort_keys=True)}`")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[101, 102, 103])
    ap.add_argument("--hours", type=float, default=2.0)
    ap.add_argument("--pairs", default="binance/BTC/USDT,binance/ETH/USDT,binance/XRP/USDT,binance/SOL/USDT")
    ap.add_argument("--episodes-per-hour", type=float, default=12.0)
    ap.add_argument("--batches", type=int, nargs="+", default=[0, 100],
                    help="depth batching of the simulated feed, ms (0: per event)")
    ap.add_argument("--processes", type=int, default=2, help="worker processes (one (seed, pair) each)")
    ap.add_argument("--second-seeds", type=int, nargs="+", default=list(SECOND_MARKET_SEEDS),
                    help="held-out seeds of the second market (no threshold was chosen on them)")
    ap.add_argument("--second-hours", type=float, default=1.0)
    ap.add_argument("--skip-second", action="store_true", help="leave out the second market")
    ap.add_argument("--skip-real", action="store_true", help="leave out the real recordings")
    ap.add_argument("--out", default=str(ROOT / "docs" / "DETECTION_EVALUATION.md"))
    ap.add_argument("--ingest-recording", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.ingest_recording:
        print(json.dumps(ingest_recording(args.ingest_recording), default=str))
        return 0

    from schemes.evaluation import evaluate, markdown_table

    pairs = [p for p in args.pairs.split(",") if p]
    doc = ["# Scheme detection: evaluation", "",
           "Generated by `" + " ".join(["python bench/evaluate_detectors.py", *(argv if argv is not None else sys.argv[1:])])
           + "` (see its docstring); do not edit by hand.", ""]
    if not args.skip_real:
        results = real_recordings()
        doc += ["## Real recordings, through the ingestion path", "",
                "data/realdata/binance-spot (hftbacktest, MIT): each recording imported into the replay format and "
                "ingested by `PairIngestor` with detection on (Binance's 100 ms depth batching), once per hash seed, "
                "each run in a fresh process on its own database.", ""]
        doc += real_section(results)
        doc.append("")
    doc += ["## Flow: real against simulated", "",
            f"`flow_profile` (market/sources/flow_stats.py) on the recordings and on {FLOW_MINUTES} simulated minutes "
            f"(seed {FLOW_SEED}, from 2024-06-03 13:00 UTC). Quantities in the base asset.", "",
            flow_table(flow_rows()), ""]
    for batch_ms in args.batches:
        res = evaluate(args.seeds, pairs, args.hours, True, episodes_per_hour=args.episodes_per_hour,
                       processes=args.processes, batch_ms=batch_ms)
        feed = "per event" if not batch_ms else f"netted in {batch_ms} ms batches (`net_depth`)"
        doc += [f"## Held-out simulator seeds, depth {feed}", "",
                f"Seeds: {', '.join(map(str, args.seeds))} (held out: thresholds were tuned on seeds 1-50 and checked "
                "on 51-100 only, see docs/DETECTION_METHOD.md). "
                f"Pairs: {', '.join(res['pairs'])}; {args.hours:g} h per seed and pair after a 5-minute warm-up; "
                f"{args.episodes_per_hour:g} spoofing episodes and {args.episodes_per_hour:g} hard negatives per "
                "pair-hour (SimulatorSource(seed, episodes_per_hour, hard_negatives=True)).", "",
                markdown_table(res), ""]
    if not args.skip_second:
        for pair_class, class_pairs in SECOND_MARKET_PAIRS.items():
            for batch_ms in args.batches:
                res = evaluate(args.second_seeds, class_pairs, args.second_hours, True,
                               episodes_per_hour=args.episodes_per_hour, processes=args.processes, batch_ms=batch_ms,
                               market="second_market")
                feed = "per event" if not batch_ms else f"netted in {batch_ms} ms batches (`net_depth`)"
                doc += [f"## Second market, {SECOND_MARKET_CLASSES[pair_class]}, depth {feed}", "",
                        "market/sources/second_market: written from DETECTION.md alone, by someone who had read "
                        "neither the simulator nor the detectors. "
                        f"Held-out seeds {', '.join(map(str, args.second_seeds))} (no threshold was chosen on them). "
                        f"Pairs: {', '.join(res['pairs'])}; {args.second_hours:g} h per seed and pair after a "
                        f"5-minute warm-up; {args.episodes_per_hour:g} spoofing episodes and as many look-alikes per "
                        "pair-hour.", "", markdown_table(res), ""]
    doc += ["## How to read it", "",
            "Episodes: 75 % are clear cases of DETECTION.md's definition (every parameter inside its threshold), 25 % "
            "near misses that break exactly one threshold (parameters[\"near_miss\"]). Recall counts clear episodes; "
            "a detection of a near miss is shown in its column and is neither a true nor a false positive. Disrupted: "
            "episodes drawn as clear cases that did not happen as drawn; they are not in the clear episodes' count "
            "nor in recall, and a detection of one (in brackets) is neither a true nor a false positive. On the "
            "simulator: takers filled the orders before the pull began (less than half of what was placed still "
            "rested, `SimulatorSource.resting_at_pull`; a filled wall), a rule found while tracing held-out misses "
            "(docs/DETECTION_METHOD.md, \"Episodes the market took first\"). On the second market: the episode as "
            "it happened, from what its scripts recorded, broke a threshold of DETECTION.md's table "
            "(`SecondMarketSource.disrupted`, market/sources/second_market/judge.py): layering executed > 10 % by "
            "the pull's end, < 3 large levels within 3 s or < 2 of them 1-25 ticks behind the touch, < 70 % removed "
            "within 60 s of the last layer, or no 1 s cluster of the pull over half of it; flipping placed > 2 ticks "
            "from the touch, under the large bound, life > 10 s, < 80 % cancelled, or no flip of the size within 1 s "
            "of the cancel; vacuuming top-10 depth < 1.5 x baseline at the pull or standing there < 2 s, < 50 % of "
            "the added depth removed within 1 s, > 20 % executed, the other side's top-10 down >= 20 % during the "
            "pull, or the mid not moved max(1 tick, 0.5 sigma) into the gap within 5 s. The rule was fixed from "
            "DETECTION.md before any detection was looked at and is the same for every episode; it changes no "
            "detection.", "",
            "Matching: same scheme (either side, so direction accuracy is measured), detection time within "
            "[the episode's collapse start, episode end + 5 s] (a detection before the first pull cannot be of it). "
            "FP counts every other detection; the number in brackets came during a spoofing episode it is not "
            "of (one of another scheme, or of its own before that episode's collapse began). "
            "False alarms: detections on background flow or a hard negative, per pair-hour. Latency: detection "
            "time minus the instant the episode became a whole case. On the simulator that is the episode's last "
            "action (for flipping the flip itself, so 0 is a detection on the aggressive order's first print; a "
            "mirror is judged once it rested 500 ms). On the second market it is the last of its collapse's "
            "thresholds met as it happened (`SecondMarketSource.completed_ms`, judge.py): layering 70 % removed, "
            "flipping 80 % cancelled and the flip's required size traded or the mirror placed, vacuuming 50 % "
            "removed and the mid moved; a ladder's tail pulled up to a minute after its cluster does not count a "
            "detection at the cluster as early.", "",
            "Targets: at most 1 alert per pair-hour on real recordings; on held-out seeds precision >= 0.90, recall "
            ">= 0.85, direction accuracy >= 0.95, false alarms <= 0.1 per pair-hour, latency p95 <= 2 s, throughput "
            ">= 20,000 book updates/s per core.", ""]
    Path(args.out).write_text("\n".join(doc))
    print("\n".join(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
