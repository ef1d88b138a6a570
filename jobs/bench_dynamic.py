"""Benchmark: global search with dynamic community selection against static global search, on the ~1M-token index
bench_index builds, with every LLM call taking `--latency` seconds (1.0: a hosted model's pace).

Builds the index against a zero-latency simulator (or reuses `--project`, a folder holding one), then asks the same
questions both ways against a simulator with the given latency and the response cache off, and prints per method:
wall, LLM calls (rating / map / reduce), prompt tokens, and the reports rated and mapped.
Issue 16's targets: dynamic wall <= static wall and <= 30 s, with fewer prompt tokens than static.

    python jobs/bench_dynamic.py --tokens 1000000 --latency 1.0
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_index import settings_for  # noqa: E402
from corpus import fresh_project  # noqa: E402

from graphrag_ray import api  # noqa: E402
from graphrag_ray.simulate.process import SimulatorProcess  # noqa: E402

QUESTIONS = (
    "What are the main changes to package configuration and installation?",
    "Which security problems were fixed, and how?",
    "What do the documents say about network services and their settings?",
)


def ask(root: Path, question: str, dynamic: bool, level: int) -> dict:
    started = time.perf_counter()
    result = asyncio.run(
        api.search(question, "global", root, community_level=level, dynamic_community_selection=dynamic)
    )
    wall = time.perf_counter() - started
    d = result.details
    return {
        "wall_s": wall,
        "calls": result.llm_calls,
        "prompt_tokens": result.prompt_tokens,
        "rating_calls": d.get("dynamic_calls", 0),
        "map_calls": d.get("map_calls", 0),
        "rated": d.get("dynamic_rated", 0),
        "mapped": d.get("reports_used", 0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--level", type=int, default=2, help="static global's community level")
    parser.add_argument("--project", type=Path, default=None, help="a project whose index is already built")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    root = args.project
    if root is None:
        root, _ = fresh_project(args.workdir, args.tokens, "bench-dynamic-")
        with SimulatorProcess(latency=0.0) as sim:
            (root / "settings.yaml").write_text(yaml.safe_dump(settings_for(sim.base_url, 2)))
            api.build_index(root=root)
    settings = yaml.safe_load((root / "settings.yaml").read_text())
    _, index, _ = api.open_index(root, vectors=False)
    levels = index.communities.group_by("level").len().sort("level")
    print(
        f"index: {index.communities.height:,} communities ("
        + ", ".join(f"level {lv}: {n:,}" for lv, n in levels.iter_rows())
        + f"), {index.entities.height:,} entities"
    )
    with SimulatorProcess(latency=args.latency) as sim:
        for model in settings["models"].values():
            model["api_base"] = sim.base_url
            model["concurrency"] = 16  # a process's default
        settings["cache"] = {"enabled": False}  # every call made, as for a new question
        (root / "settings.yaml").write_text(yaml.safe_dump(settings))
        rows = {
            "static": [ask(root, q, False, args.level) for q in QUESTIONS],
            "dynamic": [ask(root, q, True, args.level) for q in QUESTIONS],
        }
    print(f"latency {args.latency:.1f} s per call; {len(QUESTIONS)} questions; medians:")
    print(f"{'method':<9}{'wall s':>8}{'calls':>7}{'rating':>8}{'map':>6}{'prompt tok':>12}{'rated':>7}{'mapped':>8}")
    summary = {}
    for name, runs in rows.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        summary[name] = med
        print(
            f"{name:<9}{med['wall_s']:>8.1f}{med['calls']:>7.0f}{med['rating_calls']:>8.0f}{med['map_calls']:>6.0f}"
            f"{med['prompt_tokens']:>12,.0f}{med['rated']:>7.0f}{med['mapped']:>8.0f}"
        )
    print(json.dumps(rows))
    dyn, static = summary["dynamic"], summary["static"]
    print(
        f"targets: dynamic wall <= static ({dyn['wall_s']:.1f} vs {static['wall_s']:.1f} s) and <= 30 s; "
        f"prompt tokens below static ({dyn['prompt_tokens']:,.0f} vs {static['prompt_tokens']:,.0f})"
    )


if __name__ == "__main__":
    main()
