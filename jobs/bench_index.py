"""Benchmark: index about 1M tokens of real text against the simulator with zero latency.

Prints wall time per step, engine CPU seconds (the simulator excluded), engine CPU per LLM call, peak RSS of
the engine (driver + Ray processes), LLM calls and tokens.

    python jobs/bench_index.py --tokens 1000000 [--resolve]
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

from graphrag_ray.api import build_index  # noqa: E402
from graphrag_ray.api import join_ray  # noqa: E402
from graphrag_ray.simulate.process import SimulatorProcess  # noqa: E402


def settings_for(base_url: str, actors: int) -> dict:
    model = {"api_base": base_url, "api_key": "bench-key", "request_timeout": 60, "concurrency": 32}
    return {"models": {"default_chat": {**model, "model": "gpt-4o-mini",
                                        "price": {"input_per_1m": 0.15, "output_per_1m": 0.6}},
                       "default_embedding": {**model, "type": "embedding", "model": "text-embedding-3-small",
                                             "batch_size": 64}},
            "workers": {"num_actors": actors, "actor_cpus": 0, "partition_size": 16}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--resolve", action="store_true", help="entity resolution on (resolve_entities.enabled)")
    args = parser.parse_args()
    root, corpus_tokens = fresh_project(args.workdir, args.tokens, "bench-index-")
    join_ray()
    with SimulatorProcess(latency=args.latency) as sim:
        settings = settings_for(sim.base_url, args.actors)
        if args.resolve:
            settings["resolve_entities"] = {"enabled": True}
        (root / "settings.yaml").write_text(yaml.safe_dump(settings))
        with Meter(exclude_pids={sim.pid()}) as meter:
            result = build_index(root=root)
        served = sim.stats()
    total = result.ledger.total()
    print(f"corpus: {corpus_tokens:,} tokens in {len(list((root / 'input').iterdir()))} documents")
    print(f"{'step':<24}{'wall s':>9}{'calls':>9}{'prompt tok':>13}{'compl tok':>12}")
    for name, step in result.stats["steps"].items():
        usage = step["ledger"]["total"]
        print(f"{name:<24}{step['wall_s']:>9.1f}{usage['calls']:>9,}{usage['prompt_tokens']:>13,}"
              f"{usage['completion_tokens']:>12,}")
    figures = {
        "index_wall_s": round(meter.wall_s, 1),
        "engine_cpu_s": round(meter.cpu_s, 1),
        "engine_cpu_ms_per_llm_call": round(1000 * meter.cpu_s / max(1, total.calls), 2),
        "peak_rss_gb": round(meter.peak_rss_gb, 2),
        "llm_calls": total.calls, "prompt_tokens": total.prompt_tokens,
        "completion_tokens": total.completion_tokens, "simulator_served": served.get("ok", 0),
        "cpu_s_by_process": dict(sorted(meter.cpu_by_name.items(), key=lambda kv: -kv[1])),
        "rows": result.stats["rows"], "failures": result.stats["total"]["failures"],
    }
    if args.resolve:
        resolution = result.stats["steps"]["resolve_entities"]
        merges = (result.index.local_path() / "entity_merges.parquet") if result.index else None
        figures["resolution"] = {"events": resolution["events"], "items": resolution["items"],
                                 "confirmation_calls": result.ledger.total("resolve_entities").calls,
                                 "name_embedding_calls": result.ledger.total("resolve_entities_names").calls,
                                 "merges_table": str(merges)}
    print(json.dumps(figures, indent=2))
    print(f"targets: whole index <= 180 s (got {figures['index_wall_s']}), engine CPU <= 5 ms per call "
          f"(got {figures['engine_cpu_ms_per_llm_call']}), peak RSS <= 4 GB (got {figures['peak_rss_gb']})")


if __name__ == "__main__":
    main()
