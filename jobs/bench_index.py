"""Benchmark: index about 1M tokens of real text against the simulator with zero latency.

Prints wall time per step, engine CPU seconds (the simulator excluded), engine CPU per LLM call, peak RSS of the
driver and of the engine (driver + Ray processes), LLM calls and tokens. Several sizes (`--tokens 1000000,3000000,
10000000`) run one after the other, each in a process of its own (so each driver's peak is its own), and end with a
scaling table: wall per million tokens against the first size's, calls per second, CPU per call, and how the
driver's and all processes' peak memory grow.

    python jobs/bench_index.py --tokens 1000000 [--resolve]
    python jobs/bench_index.py --tokens 1000000,3000000,10000000
    python jobs/bench_index.py --tokens 30000000,100000000 --same-mix --workdir /tmp/b100   (the same text mix)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import fresh_project  # noqa: E402
from measure import Meter  # noqa: E402

from graphrag_ray.api import (
    build_index,  # noqa: E402
    join_ray,  # noqa: E402
)
from graphrag_ray.simulate.process import SimulatorProcess  # noqa: E402


def settings_for(base_url: str, actors: int, stream: bool = False) -> dict:
    # the simulator stands for a hosted (https) provider: answers in one piece, as `stream_requests: auto` asks
    # such an endpoint; --stream measures the local-server path (every answer a stream, judged by its progress)
    model = {
        "api_base": base_url,
        "api_key": "bench-key",
        "request_timeout": 60,
        "concurrency": 32,
        "stream_requests": "always" if stream else "never",
    }
    return {
        "models": {
            "default_chat": {**model, "model": "gpt-4o-mini", "price": {"input_per_1m": 0.15, "output_per_1m": 0.6}},
            "default_embedding": {**model, "type": "embedding", "model": "text-embedding-3-small", "batch_size": 64},
        },
        "workers": {"num_actors": actors, "actor_cpus": 0, "partition_size": 16},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", default="1000000", help="corpus size, or sizes separated by commas")
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--resolve", action="store_true", help="entity resolution on (resolve_entities.enabled)")
    parser.add_argument(
        "--embedding-dim",
        type=int,
        default=256,
        help="size of the simulator's vectors (text-embedding-3-small sends 1536)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--stream", action="store_true", help="every answer asked for as a stream (local servers)")
    parser.add_argument(
        "--same-mix",
        action="store_true",
        help="several sizes: each smaller corpus an even sample of the largest's documents (the same text mix)",
    )
    parser.add_argument("--sample-of", type=int, default=None, help=argparse.SUPPRESS)  # --same-mix, per size
    args = parser.parse_args()
    sizes = [int(float(t)) for t in args.tokens.split(",")]
    if len(sizes) > 1:
        return scaling(sizes, args)
    # the corpus is made in a child process: what making it took is the harness's memory, not the engine's
    root, corpus_tokens = fresh_project(
        args.workdir, sizes[0], "bench-index-", separate_process=True, sample_of=args.sample_of
    )
    join_ray()
    with SimulatorProcess(latency=args.latency, embedding_dim=args.embedding_dim) as sim:
        settings = settings_for(sim.base_url, args.actors, args.stream)
        if args.resolve:
            settings["resolve_entities"] = {"enabled": True}
        (root / "settings.yaml").write_text(yaml.safe_dump(settings))
        with Meter(exclude_pids={sim.pid()}) as meter:
            result = build_index(root=root, announce=print)
        served = sim.stats()
    total = result.ledger.total()
    print(f"corpus: {corpus_tokens:,} tokens in {len(list((root / 'input').iterdir()))} documents")
    print(f"{'step':<24}{'wall s':>9}{'calls':>9}{'prompt tok':>13}{'compl tok':>12}{'driver peak MB':>16}")
    for name, step in result.stats["steps"].items():
        usage = step["ledger"]["total"]
        print(
            f"{name:<24}{step['wall_s']:>9.1f}{usage['calls']:>9,}{usage['prompt_tokens']:>13,}"
            f"{usage['completion_tokens']:>12,}{step.get('driver_peak_rss_mb', 0):>16,}"
        )
    figures = {
        "index_wall_s": round(meter.wall_s, 1),
        "engine_cpu_s": round(meter.cpu_s, 1),
        "harness_sampling_cpu_s": round(meter.sampler_cpu_s, 1),  # the meter's own /proc reads, left out
        "engine_cpu_ms_per_llm_call": round(1000 * meter.cpu_s / max(1, total.calls), 2),
        "peak_rss_gb": round(meter.peak_rss_gb, 2),
        "peak_pss_mib": round(meter.peak_pss_mib),  # the process tree's proportional set size (shared pages once)
        "llm_calls": total.calls,
        "prompt_tokens": total.prompt_tokens,
        "completion_tokens": total.completion_tokens,
        "simulator_served": served.get("ok", 0),
        "cpu_s_by_process": dict(sorted(meter.cpu_by_name.items(), key=lambda kv: -kv[1])),
        "rows": result.stats["rows"],
        "failures": result.stats["total"]["failures"],
        "corpus_tokens": corpus_tokens,
        "driver_peak_rss_gb": round(driver_peak_rss_gb(), 2),
        "llm_calls_per_s": round(total.calls / max(meter.wall_s, 1e-9), 1),
        "step_wall_s": {name: step["wall_s"] for name, step in result.stats["steps"].items()},
    }
    if args.resolve:
        resolution = result.stats["steps"]["resolve_entities"]
        merges = (result.index.local_path() / "entity_merges.parquet") if result.index else None
        figures["resolution"] = {
            "events": resolution["events"],
            "items": resolution["items"],
            "confirmation_calls": result.ledger.total("resolve_entities").calls,
            "name_embedding_calls": result.ledger.total("resolve_entities_names").calls,
            "merges_table": str(merges),
        }
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures))
    print(
        f"targets: whole index <= 180 s (got {figures['index_wall_s']}), engine CPU <= 5 ms per call "
        f"(got {figures['engine_cpu_ms_per_llm_call']}), peak RSS <= 4 GB (got {figures['peak_rss_gb']})"
    )


def driver_peak_rss_gb() -> float:
    """This process's peak resident memory (the kernel's high-water mark)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024 / 2**30
    return 0.0


def scaling(sizes: list[int], args) -> None:
    import subprocess
    import tempfile

    runs = []
    for size in sizes:
        out = Path(tempfile.mkstemp(suffix=".json")[1])
        command = [
            sys.executable,
            __file__,
            "--tokens",
            str(size),
            "--actors",
            str(args.actors),
            "--latency",
            str(args.latency),
            "--embedding-dim",
            str(args.embedding_dim),
            "--json",
            str(out),
        ] + (["--resolve"] if args.resolve else [])
        if args.same_mix and size < max(sizes):
            command += ["--sample-of", str(max(sizes))]
        if args.workdir is not None:
            command += ["--workdir", str(args.workdir / f"t{size}")]
        print(f"===== {size:,} tokens: {' '.join(command[1:])}", flush=True)
        subprocess.run(command, check=True)
        runs.append(json.loads(out.read_text()))
    base = runs[0]
    per_m = lambda r: r["index_wall_s"] / (r["corpus_tokens"] / 1e6)  # noqa: E731
    print("\nscaling (each size in a fresh project and driver process):")
    print(
        f"{'tokens':>12}{'wall s':>9}{'s per 1M':>10}{'vs first':>9}{'calls':>9}{'calls/s':>9}{'ms CPU/call':>12}"
        f"{'driver GB':>10}{'all GB':>8}{'entities':>10}{'failures':>9}"
    )
    for r in runs:
        print(
            f"{r['corpus_tokens']:>12,}{r['index_wall_s']:>9.1f}{per_m(r):>10.1f}{per_m(r) / per_m(base):>9.2f}"
            f"{r['llm_calls']:>9,}{r['llm_calls_per_s']:>9.1f}{r['engine_cpu_ms_per_llm_call']:>12.2f}"
            f"{r['driver_peak_rss_gb']:>10.2f}{r['peak_rss_gb']:>8.2f}{r['rows']['entities']:>10,}"
            f"{r['failures']:>9}"
        )
    last = runs[-1]
    print(
        f"driver peak RSS grew {last['driver_peak_rss_gb'] - base['driver_peak_rss_gb']:+.2f} GB and all processes "
        f"{last['peak_rss_gb'] - base['peak_rss_gb']:+.2f} GB from {base['corpus_tokens']:,} to "
        f"{last['corpus_tokens']:,} tokens; wall per token {per_m(last) / per_m(base):.2f}x the first size's"
    )
    steps = list(base["step_wall_s"])
    print(f"{'step wall s':<24}" + "".join(f"{r['corpus_tokens'] / 1e6:>9.1f}M" for r in runs))
    for step in steps:
        print(f"{step:<24}" + "".join(f"{r['step_wall_s'].get(step, 0):>10.1f}" for r in runs))


if __name__ == "__main__":
    main()
