"""Side-by-side benchmark: graphrag-ray vs Microsoft GraphRAG on the same corpus and the same simulated endpoint.

    python jobs/bench_vs_graphrag.py --scenario a            # zero latency, no limits: engine overhead
    python jobs/bench_vs_graphrag.py --scenario b            # 300 ms latency, TPM 100,000: limit utilisation
    python jobs/bench_vs_graphrag.py --scenario c            # ~1M tokens, zero latency, theirs capped at 30 min
    python jobs/bench_vs_graphrag.py --scenario a --tokens 20000 --skip-shipped   # a quick look

Microsoft GraphRAG (latest 3.x) runs from its own venv (`--msgr-venv`, created if missing; never a dependency of
this project). Theirs is measured twice: as shipped, and with its always-on tracemalloc profiler switched off
(`tracemalloc.start` made a no-op by jobs/bench_runner.py); ratios are quoted against both, the targets against
the second. Both sides run as commands (start-up included) against one simulator; engine CPU is the machine's CPU
minus the simulator's; calls and tokens per stage are what the simulator served, by kind of prompt.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import msgraphrag  # noqa: E402
from corpus import build_corpus  # noqa: E402
from measure import run_measured  # noqa: E402

from graphrag_ray.simulate.process import SimulatorProcess  # noqa: E402

HERE = Path(__file__).resolve().parent
RUNNER = HERE / "bench_runner.py"
SCENARIOS = {
    "a": {"tokens": 100_000, "latency": 0.0, "tpm": None, "cap_s": 1800},
    "b": {"tokens": 20_000, "latency": 0.3, "tpm": 100_000, "cap_s": 1800},
    "c": {"tokens": 1_000_000, "latency": 0.0, "tpm": None, "cap_s": 1800},
}
ENTITY_TYPES = ["organization", "person", "geo", "event"]
CONCURRENCY = 32  # requests in flight: theirs concurrent_requests; ours 2 actors x 16
MAX_CLUSTER_SIZE = 10
LOCAL_QUESTION = "What does the license say about copying and distributing the software?"
GLOBAL_QUESTION = "What are the main software licenses and projects described in these documents?"
# simulator kinds of prompt -> stage rows
KIND_STAGE = {
    "extract_graph": "extract",
    "extract_glean": "extract",
    "extract_loop": "extract",
    "extract_claims": "extract",
    "extract_claims_glean": "extract",
    "summarize": "summarize",
    "community_report": "reports",
    "embedding": "embed",
}
STAGE_ROWS = ["load+chunk", "extract+summarize", "communities", "reports", "embed", "finalize"]
OUR_STAGES = {
    "load_documents": "load+chunk",
    "chunk": "load+chunk",
    "extract_graph": "extract+summarize",
    "extract_claims": "extract+summarize",
    "merge_graph": "extract+summarize",
    "summarize_descriptions": "extract+summarize",
    "communities": "communities",
    "community_reports": "reports",
    "embed": "embed",
    "finalize": "finalize",
}


# ------------------------------------------------------------------------------------------ simulator
def llm_usage(stats: dict) -> dict:
    """Calls and tokens per stage, from what the simulator served."""
    stages: dict[str, dict[str, int]] = {}
    for key, value in stats.items():
        if key.startswith("kind_"):
            kind = key[5:]
            stage = KIND_STAGE.get(kind, "query" if kind.startswith("query_") else "other")
            row = stages.setdefault(stage, {"calls": 0, "prompt": 0, "completion": 0})
            row["calls"] += value
            row["prompt"] += stats.get(f"prompt_tokens_{kind}", 0)
            row["completion"] += stats.get(f"completion_tokens_{kind}", 0)
    window = max(1e-9, stats.get("last_ok_at", 0) - stats.get("first_ok_at", 0))
    return {
        "stages": stages,
        "calls": stats.get("ok", 0),
        "prompt": stats.get("prompt_tokens", 0),
        "completion": stats.get("completion_tokens", 0),
        "429s": stats.get("429_limit", 0),
        "window_s": window,
    }


# ------------------------------------------------------------------------------------------ the two sides
def our_root(work: Path, corpus: Path, base_url: str, tpm: int | None) -> Path:
    root = work / "ours"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(corpus, root / "input")
    model = {
        "api_base": base_url,
        "api_key": "bench-key",
        "request_timeout": 120,
        "stream_requests": "never",
        "concurrency": CONCURRENCY // 2,
        **({"rate_limit": {"tpm": tpm}} if tpm else {}),
    }
    settings = {
        "models": {
            "default_chat": {**model, "model": "gpt-4o-mini"},
            "default_embedding": {**model, "type": "embedding", "model": "text-embedding-3-small"},
        },
        "workers": {"num_actors": 2, "actor_cpus": 0},
        "extract_graph": {"entity_types": ENTITY_TYPES, "max_gleanings": 1},
        "cluster_graph": {"max_cluster_size": MAX_CLUSTER_SIZE},
        "chunks": {"size": 1200, "overlap": 100},
    }
    (root / "settings.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
    return root


def their_root(work: Path, name: str, corpus: Path, python: Path, base_url: str, tpm: int | None) -> Path:
    root = work / name
    shutil.rmtree(root, ignore_errors=True)
    msgraphrag.init_project(python, root)
    shutil.rmtree(root / "input", ignore_errors=True)
    shutil.copytree(corpus, root / "input")
    msgraphrag.configure(
        root,
        base_url,
        concurrency=CONCURRENCY,
        tpm=tpm,
        rpm=None,
        entity_types=ENTITY_TYPES,
        max_cluster_size=MAX_CLUSTER_SIZE,
        max_gleanings=1,
    )
    return root


def run_side(
    side: str,
    python: Path,
    root: Path,
    args: list[str],
    sim: SimulatorProcess,
    *,
    tracer: bool = True,
    cap_s: float | None = None,
) -> dict:
    """One command through bench_runner.py, measured; with the simulator's view of what it called."""
    timings = root / f".timings-{time.time_ns()}.json"
    cmd = [str(python), str(RUNNER), "--side", side, "--timings", str(timings)]
    cmd += ([] if tracer else ["--no-tracemalloc"]) + ["--", *args]
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "GRAPHRAG_API_KEY": "bench-key"}
    env.pop("RAY_ADDRESS", None)
    sim.reset()
    measured = run_measured(cmd, env=env, exclude_pids={sim.pid()}, timeout=cap_s, log=root / f"{args[0]}.log")
    measured["served"] = sim.stats()
    measured["llm"] = llm_usage(measured["served"])
    measured["timings"] = json.loads(timings.read_text()) if timings.exists() else {}
    return measured


def our_stage_walls(root: Path) -> dict[str, float]:
    from graphrag_ray.storage.tables import current_index

    stats = json.loads(current_index(root / "output").read_bytes("stats.json"))  # the published version's
    walls: dict[str, float] = {}
    for name, step in stats["steps"].items():
        walls[OUR_STAGES.get(name, "finalize")] = walls.get(OUR_STAGES.get(name, "finalize"), 0.0) + step["wall_s"]
    return walls


def queries(side: str, python: Path, root: Path, sim: SimulatorProcess, repeats: int) -> dict:
    local_args = ["query", "--root", str(root), "--method", "local", LOCAL_QUESTION]
    global_args = ["query", "--root", str(root), "--method", "global", GLOBAL_QUESTION]
    local = [run_side(side, python, root, local_args, sim) for _ in range(repeats)]
    glob = run_side(side, python, root, global_args, sim)
    contexts = [t for run in local for t in run["timings"].get("local_context_s", [])]
    return {
        "local_command_s": statistics.median(r["wall_s"] for r in local),
        "local_context_s": statistics.median(contexts) if contexts else None,
        "local_ok": all(r["returncode"] == 0 for r in local),
        "global_command_s": glob["wall_s"],
        "global_ok": glob["returncode"] == 0,
        "global_search_s": (glob["timings"].get("global_search_s") or [None])[0],
        "global_map_calls": glob["served"].get("kind_query_global_map", 0),
        "global_reduce_calls": glob["served"].get("kind_query_global_reduce", 0),
    }


# ------------------------------------------------------------------------------------------ report
def index_figures(run: dict, corpus_tokens: int, tpm: int | None, walls: dict[str, float]) -> dict:
    llm = run["llm"]
    figures = {
        "wall_s": run["wall_s"],
        "cpu_s": run["cpu_s"],
        "cpu_ms_per_call": 1000 * run["cpu_s"] / max(1, llm["calls"]),
        "peak_rss_gb": run["peak_rss_gb"],
        "peak_pss_mib": run.get("peak_pss_mib"),  # shared pages counted once (Ray's processes share many)
        "calls": llm["calls"],
        "prompt": llm["prompt"],
        "completion": llm["completion"],
        "prompt_per_corpus_token": llm["prompt"] / corpus_tokens,
        "calls_per_1k_corpus_tokens": 1000 * llm["calls"] / corpus_tokens,
        "429s": llm["429s"],
        "stages": llm["stages"],
        "walls": walls,
        "capped": run["capped"],
        "ok": run["returncode"] == 0,
    }
    if tpm:
        served = llm["prompt"] + llm["completion"]
        figures["utilisation"] = served / (tpm * llm["window_s"] / 60)
        figures["wall_vs_limit"] = run["wall_s"] / (60 * served / tpm)
    return figures


def _fmt(value, digits=2) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def _ratio(ours, theirs) -> str:
    return (
        f"{ours / theirs:.2f}x"
        if isinstance(ours, (int, float)) and isinstance(theirs, (int, float)) and theirs
        else "-"
    )


def print_table(title: str, rows: list[tuple[str, object, object, object]]) -> None:
    print(f"\n{title}")
    print(f"{'measure':<42}{'ours':>14}{'theirs (tracer off)':>21}{'ratio':>9}{'theirs (shipped)':>18}{'ratio':>9}")
    for name, ours, off, shipped in rows:
        print(
            f"{name:<42}{_fmt(ours):>14}{_fmt(off):>21}{_ratio(ours, off):>9}{_fmt(shipped):>18}"
            f"{_ratio(ours, shipped):>9}"
        )


def rows_for(ours: dict, off: dict, shipped: dict) -> list[tuple]:
    get = lambda d, *keys: _dig(d, keys)  # noqa: E731
    rows = [("index wall s (command)", ours["wall_s"], off["wall_s"], get(shipped, "wall_s"))]
    rows += [
        (f"  stage wall s: {s}", ours["walls"].get(s), off["walls"].get(s), get(shipped, "walls", s))
        for s in STAGE_ROWS
    ]
    rows += [
        ("engine CPU s", ours["cpu_s"], off["cpu_s"], get(shipped, "cpu_s")),
        (
            "engine CPU ms per LLM call",
            ours["cpu_ms_per_call"],
            off["cpu_ms_per_call"],
            get(shipped, "cpu_ms_per_call"),
        ),
        ("peak RSS GB", ours["peak_rss_gb"], off["peak_rss_gb"], get(shipped, "peak_rss_gb")),
        ("peak PSS MiB", get(ours, "peak_pss_mib"), get(off, "peak_pss_mib"), get(shipped, "peak_pss_mib")),
        ("LLM calls", ours["calls"], off["calls"], get(shipped, "calls")),
    ]
    for stage in ("extract", "summarize", "reports", "embed"):
        rows.append(
            (
                f"  calls: {stage}",
                get(ours, "stages", stage, "calls"),
                get(off, "stages", stage, "calls"),
                get(shipped, "stages", stage, "calls"),
            )
        )
    rows += [
        ("prompt tokens", ours["prompt"], off["prompt"], get(shipped, "prompt")),
        ("completion tokens", ours["completion"], off["completion"], get(shipped, "completion")),
    ]
    for stage in ("extract", "summarize", "reports", "embed"):
        rows.append(
            (
                f"  prompt tokens: {stage}",
                get(ours, "stages", stage, "prompt"),
                get(off, "stages", stage, "prompt"),
                get(shipped, "stages", stage, "prompt"),
            )
        )
    rows += [
        (
            "prompt tokens per corpus token",
            ours["prompt_per_corpus_token"],
            off["prompt_per_corpus_token"],
            get(shipped, "prompt_per_corpus_token"),
        ),
        (
            "LLM calls per 1k corpus tokens",
            ours["calls_per_1k_corpus_tokens"],
            off["calls_per_1k_corpus_tokens"],
            get(shipped, "calls_per_1k_corpus_tokens"),
        ),
        ("429s received", ours["429s"], off["429s"], get(shipped, "429s")),
    ]
    if "utilisation" in ours:
        rows += [
            ("rate-limit utilisation", ours["utilisation"], off.get("utilisation"), get(shipped, "utilisation")),
            (
                "index wall / (total tokens / TPM)",
                ours["wall_vs_limit"],
                off.get("wall_vs_limit"),
                get(shipped, "wall_vs_limit"),
            ),
        ]
    return rows


def _dig(data, keys):
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


# ------------------------------------------------------------------------------------------ main
def run_scenario(name: str, args, python: Path, work: Path) -> dict:
    spec = {**SCENARIOS[name], **({"tokens": args.tokens} if args.tokens else {})}
    corpus = work / "corpus"
    shutil.rmtree(corpus, ignore_errors=True)
    corpus_tokens = build_corpus(corpus, spec["tokens"])
    print(
        f"\n=== scenario {name}: {corpus_tokens:,} corpus tokens in {len(list(corpus.iterdir()))} documents, "
        f"latency {spec['latency']} s, TPM {spec['tpm'] or 'unlimited'}, theirs capped at {spec['cap_s']} s",
        flush=True,
    )
    with SimulatorProcess(latency=spec["latency"], tpm=spec["tpm"]) as sim:
        results: dict[str, dict] = {}
        root = our_root(work, corpus, sim.base_url, spec["tpm"])
        run = run_side("ours", Path(sys.executable), root, ["index", "--root", str(root)], sim)
        if run["returncode"] != 0:
            raise SystemExit(f"our index failed: see {root / 'index.log'}")
        results["ours"] = index_figures(run, corpus_tokens, spec["tpm"], our_stage_walls(root))
        results["ours"]["query"] = queries("ours", Path(sys.executable), root, sim, args.repeats)
        print(f"ours: {run['wall_s']:.1f} s", flush=True)
        earlier = json.loads(args.theirs_from.read_text()).get(name, {}) if args.theirs_from else {}
        for label, tracer in (("theirs_off", False), ("theirs_shipped", True)):
            if label in earlier:  # their code did not change: reuse figures measured on the same corpus
                results[label] = earlier[label]
                print(f"{label}: {earlier[label]['wall_s']:.1f} s (from {args.theirs_from})", flush=True)
                continue
            if label == "theirs_shipped" and args.skip_shipped:
                continue
            troot = their_root(work, label, corpus, python, sim.base_url, spec["tpm"])
            run = run_side(
                "theirs", python, troot, ["index", "--root", str(troot)], sim, tracer=tracer, cap_s=spec["cap_s"]
            )
            figures = index_figures(run, corpus_tokens, spec["tpm"], msgraphrag.stage_walls(troot))
            if run["capped"]:
                figures["completed_workflows"] = msgraphrag.workflows_done(troot / "index.log")
            results[label] = figures
            print(f"{label}: {run['wall_s']:.1f} s{' (capped)' if run['capped'] else ''}", flush=True)
            if label == "theirs_off" and run["returncode"] == 0:
                results[label]["query"] = queries("theirs", python, troot, sim, args.repeats)
    report(name, results, corpus_tokens)
    return results


def report(name: str, results: dict, corpus_tokens: int) -> None:
    ours, off, shipped = results["ours"], results["theirs_off"], results.get("theirs_shipped", {})
    print_table(f"scenario {name} - indexing ({corpus_tokens:,} corpus tokens)", rows_for(ours, off, shipped))
    for label, data in (("theirs (tracer off)", off), ("theirs (shipped)", shipped)):
        if data.get("capped"):
            print(f"  {label} hit the cap; workflows completed: {', '.join(data.get('completed_workflows', []))}")
    oq, tq = ours.get("query", {}), off.get("query", {})
    print_table(
        f"scenario {name} - queries",
        [
            ("local context build s (median)", oq.get("local_context_s"), tq.get("local_context_s"), None),
            ("local query command s (start-up incl.)", oq.get("local_command_s"), tq.get("local_command_s"), None),
            ("global search s", oq.get("global_search_s"), tq.get("global_search_s"), None),
            ("global map calls", oq.get("global_map_calls"), tq.get("global_map_calls"), None),
            ("global query command s", oq.get("global_command_s"), tq.get("global_command_s"), None),
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=[*SCENARIOS, "all"], default="a")
    parser.add_argument("--tokens", type=int, default=None, help="corpus size (default: the scenario's)")
    parser.add_argument("--msgr-venv", type=Path, default=Path(os.environ.get("MSGR_VENV", HERE.parent / ".msgr-venv")))
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=3, help="local query runs (the median is reported)")
    parser.add_argument("--skip-shipped", action="store_true", help="measure theirs with the tracer off only")
    parser.add_argument("--json", type=Path, default=None, help="also write every figure here")
    parser.add_argument(
        "--theirs-from",
        type=Path,
        default=None,
        help="reuse theirs' figures from an earlier --json file (same scenario and corpus size) "
        "instead of re-running them, e.g. jobs/results/bench_vs_graphrag_c.json",
    )
    args = parser.parse_args()
    python = msgraphrag.ensure_venv(args.msgr_venv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-vs-graphrag-"))
    print(f"graphrag-ray vs Microsoft GraphRAG {msgraphrag.version(python)}; work folder {work}")
    results = {
        s: run_scenario(s, args, python, work / s) for s in (SCENARIOS if args.scenario == "all" else [args.scenario])
    }
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
