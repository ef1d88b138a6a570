"""Dollars as billed: the same corpus indexed by us (synchronously, and through the Batch API) and by Microsoft
GraphRAG 3.x (its own venv, as bench_vs_graphrag.py runs it) against one simulator with OpenAI's prompt cache on
(`simulate-llm --prompt-cache`: prompts of 1,024+ tokens reuse the longest earlier prefix, in 128-token steps).

    python jobs/bench_cost.py                       # ~1M corpus tokens
    python jobs/bench_cost.py --tokens 100000 --skip-theirs
    python jobs/bench_cost.py --skip-theirs --variant glean-conversation:extract_graph.gleaning_layout=conversation

Each side's prompt, cached and completion tokens are what the simulator served it (per kind of prompt), priced at
the list prices of gpt-4o-mini, gpt-4.1-mini and gpt-5-mini (config/prices.py): synchronous with the cache
discount; batch at the batch discount - applied on top of the cache discount, as OpenAI's pricing page lists
cached-input prices for its Batch tier. Embeddings (text-embedding-3-small, synchronous on both sides) are in
every bill. Goals (issue 61): our batch bill <= 0.45x theirs synchronous with caching, for every sheet; our
synchronous bill with caching <= 0.80x theirs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_vs_graphrag as side_by_side  # noqa: E402
import msgraphrag  # noqa: E402
from corpus import build_corpus  # noqa: E402

from graphrag_ray.config.prices import LIST_PRICES  # noqa: E402
from graphrag_ray.config.prompts import load_prompt  # noqa: E402
from graphrag_ray.simulate.process import SimulatorProcess  # noqa: E402

SHEETS = ("gpt-4o-mini", "gpt-4.1-mini", "gpt-5-mini")
EMBEDDING = LIST_PRICES["text-embedding-3-small"]


def tokens(served: dict) -> dict[str, int]:
    """Chat prompt / cached / completion tokens and embedding tokens the simulator served one run."""
    embed = served.get("prompt_tokens_embedding", 0)
    kinds = {
        key[5:]: {
            "calls": value,
            "prompt": served.get(f"prompt_tokens_{key[5:]}", 0),
            "cached": served.get(f"cached_tokens_{key[5:]}", 0),
            "completion": served.get(f"completion_tokens_{key[5:]}", 0),
        }
        for key, value in served.items()
        if key.startswith("kind_") and key != "kind_embedding"
    }
    return {
        "kinds": kinds,
        "calls": served.get("ok", 0) - served.get("kind_embedding", 0),
        "prompt": served.get("prompt_tokens", 0) - embed,
        "cached": served.get("cached_tokens", 0) - served.get("cached_tokens_embedding", 0),
        "completion": served.get("completion_tokens", 0),
        "embedding": embed,
    }


def angled(prompt: str) -> str:
    """The packaged extraction prompt with Microsoft's record format: `<|>` between fields, `##` between records
    (`--variant angled:extract_graph.prompt=prompts/extract_graph_angled.txt`)."""
    lines = []
    for line in prompt.splitlines():
        if line.startswith(('("entity"|', '("relationship"|')) and lines and lines[-1].startswith('("'):
            lines.append("{record_delimiter}")
        if line.startswith(('("entity"|', '("relationship"|', "Format each")):
            line = line.replace("|", "{tuple_delimiter}")
        lines.append(line.replace(", one per line.", ". Use **{record_delimiter}** as the list delimiter."))
    return "\n".join(lines) + "\n"


def bill(counts: dict[str, int], sheet: str, batch: bool = False, cache: bool = True) -> float:
    price = LIST_PRICES[sheet]
    cached = counts["cached"] if cache else 0
    chat = (
        (counts["prompt"] - cached) * price.input
        + cached * (price.cached_input if price.cached_input is not None else price.input)
        + counts["completion"] * price.output
    ) / 1e6
    return chat * (price.batch_discount if batch else 1.0) + counts["embedding"] * EMBEDDING.input / 1e6


def our_run(
    work: Path, name: str, corpus: Path, sim: SimulatorProcess, batch: bool, settings_changed: dict | None = None
) -> dict:
    import yaml

    root = side_by_side.our_root(work, corpus, sim.base_url, None)
    root = root.rename(work / name)
    settings = yaml.safe_load((root / "settings.yaml").read_text(encoding="utf-8"))
    if batch:
        settings["batch"] = {"poll_interval_s": 0.5}
    for key, value in (settings_changed or {}).items():  # section.key: value
        section, field = key.split(".", 1)
        settings.setdefault(section, {})[field] = yaml.safe_load(value)
    (root / "settings.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
    (root / "prompts").mkdir(exist_ok=True)
    (root / "prompts" / "extract_graph_angled.txt").write_text(angled(load_prompt(None, "prompts/extract_graph.txt")))
    args = ["index", "--root", str(root)] + (["--batch"] if batch else [])
    run = side_by_side.run_side("ours", Path(sys.executable), root, args, sim)
    assert run["returncode"] == 0, f"our {name} index failed: see {root / 'index.log'}"
    return run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--skip-theirs", action="store_true")
    parser.add_argument(
        "--msgr-venv", type=Path, default=Path(os.environ.get("MSGR_VENV", side_by_side.HERE.parent / ".msgr-venv"))
    )
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME:SECTION.KEY=VALUE[,...]",
        help="also a synchronous run of ours with these settings changed (a layout to compare by dollars)",
    )
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-cost-"))
    corpus = work / "corpus"
    shutil.rmtree(corpus, ignore_errors=True)
    corpus_tokens = build_corpus(corpus, args.tokens)
    runs: dict[str, dict] = {}
    with SimulatorProcess(prompt_cache=True, batch_latency=0.5) as sim:
        runs["ours sync"] = tokens(our_run(work, "ours-sync", corpus, sim, batch=False)["served"])
        batch_run = our_run(work, "ours-batch", corpus, sim, batch=True)
        runs["ours batch"] = tokens(batch_run["served"])
        print(f"ours batch: {batch_run['served'].get('sync_chat', 0)} synchronous chat calls", flush=True)
        for variant in args.variant:
            name, changes = variant.split(":", 1)
            changed = dict(change.split("=", 1) for change in changes.split(","))
            runs[f"ours {name}"] = tokens(our_run(work, f"ours-{name}", corpus, sim, False, changed)["served"])
        if not args.skip_theirs:
            python = msgraphrag.ensure_venv(args.msgr_venv)
            root = side_by_side.their_root(work, "theirs", corpus, python, sim.base_url, None)
            theirs = side_by_side.run_side("theirs", python, root, ["index", "--root", str(root)], sim, tracer=False)
            assert theirs["returncode"] == 0, f"their index failed: see {root / 'index.log'}"
            runs[f"Microsoft GraphRAG {msgraphrag.version(python)}"] = tokens(theirs["served"])
    print(
        f"\n# python jobs/bench_cost.py --tokens {args.tokens}: {corpus_tokens:,} corpus tokens, simulator with "
        "OpenAI's prompt cache; list prices of config/prices.py"
    )
    print(f"{'':34}{'chat calls':>12}{'prompt':>12}{'cached':>12}{'cached %':>10}{'completion':>12}{'embedding':>12}")
    for name, c in runs.items():
        share = 100 * c["cached"] / max(1, c["prompt"])
        print(
            f"{name:34}{c['calls']:>12,}{c['prompt']:>12,}{c['cached']:>12,}{share:>9.0f}%{c['completion']:>12,}{c['embedding']:>12,}"
        )
    print(f"\n{'per kind of prompt':34}{'calls':>12}{'prompt':>12}{'cached':>12}{'completion':>12}")
    for name, c in runs.items():
        for kind, k in sorted(c["kinds"].items()):
            print(
                f"  {name[:14]:14} {kind:17}{k['calls']:>12,}{k['prompt']:>12,}{k['cached']:>12,}{k['completion']:>12,}"
            )
    lines = [
        ("ours, synchronous, no cache", "ours sync", False, False),
        ("ours, synchronous, cached", "ours sync", False, True),
        ("ours, Batch API, cached", "ours batch", True, True),
        *(
            (f"{name}, synchronous, cached", name, False, True)
            for name in runs
            if name.startswith("ours ") and name not in ("ours sync", "ours batch")
        ),
    ]
    theirs_name = next((n for n in runs if n.startswith("Microsoft")), None)
    if theirs_name:
        lines += [
            ("theirs, synchronous, no cache", theirs_name, False, False),
            ("theirs, synchronous, cached", theirs_name, False, True),
        ]
    width = max(34, *(len(label) + 2 for label, *_ in lines))
    print(f"\n{'dollars':{width}}" + "".join(f"{s:>16}" for s in SHEETS))
    for label, name, batch, cache in lines:
        print(f"{label:{width}}" + "".join(f"{bill(runs[name], s, batch, cache):>16.4f}" for s in SHEETS))
    if theirs_name:
        print(f"\n{'ratio to theirs (cached, sync)':{width}}" + "".join(f"{s:>16}" for s in SHEETS))
        for label, name, batch, goal in (
            ("ours sync / theirs", "ours sync", False, 0.80),
            ("ours batch / theirs", "ours batch", True, 0.45),
        ):
            ratios = [bill(runs[name], s, batch) / bill(runs[theirs_name], s) for s in SHEETS]
            verdict = "goal met" if all(r <= goal for r in ratios) else f"goal <= {goal:.2f} NOT met"
            print(f"{label:{width}}" + "".join(f"{r:>15.2f}x" for r in ratios) + f"   ({verdict})")
    share = {
        n: c["completion"] * LIST_PRICES["gpt-4o-mini"].output / 1e6 / max(1e-12, bill(c, "gpt-4o-mini"))
        for n, c in runs.items()
    }
    print(
        "\ncompletion tokens' share of the gpt-4o-mini cached bill: "
        + ", ".join(f"{n} {100 * v:.0f}%" for n, v in share.items())
    )


if __name__ == "__main__":
    main()
