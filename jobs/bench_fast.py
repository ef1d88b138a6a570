"""Benchmark: index about 1M tokens of real text with the offline `fast` method (no LLM, local embedder).

Prints tokens/s per step, total wall time and peak RSS (target: <= 5 minutes on 2 cores).

    python jobs/bench_fast.py --tokens 1000000
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

SETTINGS = {
    "models": {"default_chat": {"api_key": ""}, "default_embedding": {"type": "local_embedding", "dimensions": 256}},
    "workers": {"num_actors": 2, "actor_cpus": 0, "partition_size": 16},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    root, corpus_tokens = fresh_project(args.workdir, args.tokens, "bench-fast-")
    (root / "settings.yaml").write_text(yaml.safe_dump(SETTINGS))
    join_ray()
    with Meter() as meter:
        result = build_index(root=root, method="fast", announce=print)
    print(f"corpus: {corpus_tokens:,} tokens in {len(list((root / 'input').iterdir()))} documents")
    print(f"{'step':<22}{'wall s':>9}{'tokens/s':>12}")
    for name, step in result.stats["steps"].items():
        rate = corpus_tokens / step["wall_s"] if step["wall_s"] else float("inf")
        print(f"{name:<22}{step['wall_s']:>9.1f}{rate:>12,.0f}")
    figures = {
        "index_wall_s": round(meter.wall_s, 1),
        "tokens_per_s": round(corpus_tokens / meter.wall_s),
        "engine_cpu_s": round(meter.cpu_s, 1),
        "peak_rss_gb": round(meter.peak_rss_gb, 2),
        "llm_calls": result.ledger.total().calls,
        "rows": result.stats["rows"],
    }
    print(json.dumps(figures, indent=2))
    print(f"target: <= 300 s on 2 cores (got {figures['index_wall_s']} s)")


if __name__ == "__main__":
    main()
