"""Benchmark: a living index. Build the bench_index corpus (real text, ~1M tokens; `--corpus vim`: vim's help,
whose VIM is in most text units) against the simulator at zero latency, then change it - add 1 % new documents
and delete 1 % (`--documents N`: N of each) - and `update`. Prints the full build's and the
update's calls, prompt tokens and wall, the update's share of each (targets: <= 5 % of calls and prompt tokens,
<= 10 % of wall), what changed, and the calls and prompt tokens per stage of both runs.

    python jobs/bench_update.py --tokens 1000000 [--latency 1.0] [--cli]
    python jobs/bench_update.py --tokens 1000000 --corpus vim --documents 4 --round-trip

By default both runs go through the API in this process, with Ray already running (the engine's own cost). With
`--cli` they are `graphrag-ray index` and `graphrag-ray update`, each a fresh process as a user runs them
(`workers.executor: auto`: the build starts Ray, a small update runs in its own process).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_index import settings_for  # noqa: E402
from corpus import fresh_project  # noqa: E402
from graph_compare import comparable_graph  # noqa: E402
from measure import Meter  # noqa: E402

from graphrag_ray.api import build_index, join_ray, update_index  # noqa: E402
from graphrag_ray.llm.ledger import UsageLedger  # noqa: E402
from graphrag_ray.simulate.process import SimulatorProcess  # noqa: E402
from graphrag_ray.storage.tables import current_index  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--change", type=float, default=0.01, help="share of documents added, and deleted")
    parser.add_argument("--documents", type=int, default=None, help="documents added, and deleted (not a share)")
    parser.add_argument(
        "--corpus",
        default="docs",
        choices=["docs", "vim"],
        help="docs: the bench_index corpus; vim: vim's help alone, a graph with real hubs",
    )
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument(
        "--latency",
        type=float,
        default=0.0,
        help="seconds the simulator takes per call (0: the engine's own cost; 1: closer to a provider)",
    )
    parser.add_argument("--cli", action="store_true", help="run `graphrag-ray index` / `update` as fresh processes")
    parser.add_argument(
        "--round-trip",
        action="store_true",
        help="then undo the change (the added documents deleted, the deleted ones back), update again and compare "
        "the graph with the build's",
    )
    args = parser.parse_args()
    root, corpus_tokens = fresh_project(args.workdir, args.tokens, "bench-update-", corpus=args.corpus)
    docs = sorted((root / "input").iterdir())
    n = args.documents or max(1, round(len(docs) * args.change))
    held = root.parent / "held-out"
    shutil.rmtree(held, ignore_errors=True)
    held.mkdir()
    for path in docs[-n:]:  # the documents the update adds
        shutil.move(path, held / path.name)
    if not args.cli:
        join_ray()
    with SimulatorProcess(latency=args.latency) as sim:
        settings = settings_for(sim.base_url, args.actors)
        if args.cli:
            settings["workers"]["executor"] = "auto"
        (root / "settings.yaml").write_text(yaml.safe_dump(settings))
        full, full_meter = run_cli(root, "index") if args.cli else metered(sim, lambda: build_index(root=root))
        for path in held.iterdir():
            shutil.move(path, root / "input" / path.name)
        built_graph = comparable_graph(current_index(root / "output")) if args.round_trip else None
        deleted = root.parent / "deleted"
        shutil.rmtree(deleted, ignore_errors=True)
        deleted.mkdir()
        for path in docs[:n]:  # the documents the update deletes
            shutil.move(root / "input" / path.name, deleted / path.name)
        updated, update_meter = run_cli(root, "update") if args.cli else metered(sim, lambda: update_index(root=root))
        runs = {"full build": (full, full_meter), "update": (updated, update_meter)}
        if args.round_trip:  # the change undone
            for path in docs[-n:]:
                shutil.move(root / "input" / path.name, held / path.name)
            for path in deleted.iterdir():
                shutil.move(path, root / "input" / path.name)
            runs["undone"] = run_cli(root, "update") if args.cli else metered(sim, lambda: update_index(root=root))
            reverted_graph = comparable_graph(current_index(root / "output"))
    print(
        f"corpus: {corpus_tokens:,} tokens in {len(docs)} documents; the update adds {n} and deletes {n}; "
        f"simulator latency {args.latency:g} s per call; "
        + (
            "`graphrag-ray index` / `update` as fresh processes, executor auto: "
            f"{full.stats.get('executor')} / {updated.stats.get('executor')}"
            if args.cli
            else "API in this process, Ray running"
        )
    )
    print(f"{'run':<12}{'wall s':>9}{'calls':>9}{'prompt tok':>13}{'compl tok':>12}{'cache hits':>12}")
    figures = {}
    for name, (result, meter) in runs.items():
        total = result.ledger.total()
        figures[name] = {
            "wall_s": round(meter.wall_s, 1),
            "calls": total.calls,
            "prompt_tokens": total.prompt_tokens,
            "completion_tokens": total.completion_tokens,
            "cache_hits": total.cache_hits,
        }
        print(
            f"{name:<12}{meter.wall_s:>9.1f}{total.calls:>9,}{total.prompt_tokens:>13,}"
            f"{total.completion_tokens:>12,}{total.cache_hits:>12,}"
        )
    share = {
        k: round(figures["update"][k] / max(1, figures["full build"][k]), 4)
        for k in ("calls", "prompt_tokens", "wall_s")
    }
    print(
        f"update / full build: calls {share['calls']:.1%} (target <= 5 %), prompt tokens "
        f"{share['prompt_tokens']:.1%} (target <= 5 %), wall {share['wall_s']:.1%} (target <= 10 %)"
    )
    if args.round_trip:
        same = [a == b for a, b in zip(built_graph, reverted_graph)]
        print(
            f"round trip (the change undone, then updated): entities {'equal' if same[0] else 'DIFFER'} "
            f"({len(reverted_graph[0]):,} rows), relationships {'equal' if same[1] else 'DIFFER'} "
            f"({len(reverted_graph[1]):,} rows) to the build's, each summarised row compared by the description set "
            "it stands for"
        )
        figures["round_trip_restores_graph"] = all(same)
    changes = updated.stats.get("changes", {})
    print("changed: " + "; ".join(f"{t} " + "/".join(f"{k} {v}" for k, v in d.items()) for t, d in changes.items()))
    for name, (result, _) in runs.items():
        print(
            f"{name} calls / prompt tokens per stage: "
            + ", ".join(
                f"{stage} {result.ledger.total(stage).calls:,} / {result.ledger.total(stage).prompt_tokens:,}"
                for stage in sorted({s for s, _ in result.ledger.entries})
            )
        )
    reports = updated.stats["steps"]["community_reports"]
    revised = reports["events"].get("revised", 0)
    unrevised = reports["events"].get("kept_small_change", 0)
    print(
        f"update reports: {reports['items'] - unrevised} written ({revised} revised from the previous report and the "
        f"changed rows), {reports['carried_items']} carried, {unrevised} kept through a few added, removed or "
        f"changed rows (community_reports.revise_min_changed_share)"
    )
    summaries = updated.stats["steps"]["summarize_descriptions"]
    kept = summaries["events"].get("kept_small_change", 0)
    print(
        f"update summaries: {summaries['items'] - kept} written ({summaries['events'].get('revised', 0)} revised "
        f"from the previous summary and the changed descriptions), {summaries['carried_items']} carried, {kept} "
        f"kept through a few added descriptions (summarize_descriptions.keep_max_added_share)"
    )
    print(
        "update wall per step: "
        + ", ".join(f"{name} {step['wall_s']:.1f}" for name, step in updated.stats["steps"].items())
    )
    print(
        json.dumps(
            {
                "corpus_tokens": corpus_tokens,
                "documents": len(docs),
                "changed_documents": n,
                **figures,
                "share": share,
                "changes": changes,
            }
        )
    )


def metered(sim, run):
    with Meter(exclude_pids={sim.pid()}) as meter:
        result = run()
    return result, meter


def run_cli(root: Path, command: str):
    """`graphrag-ray <command> --root ROOT` in a fresh process: its wall, and what it published (stats, ledger)."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "graphrag_ray.cli", command, "--root", str(root)], capture_output=True, text=True
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"graphrag-ray {command} failed: {done.stderr[-2000:]}")
    version = root / "output" / "versions" / (root / "output" / "CURRENT").read_text().strip()
    stats = json.loads((version / "stats.json").read_text())
    ledger = UsageLedger.from_dict(json.loads((version / "ledger.json").read_text()))
    return SimpleNamespace(stats=stats, ledger=ledger), SimpleNamespace(wall_s=wall)


if __name__ == "__main__":
    main()
