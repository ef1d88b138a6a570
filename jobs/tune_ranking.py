"""Tune one `local_search.ranking` setting on the **dev halves** only: local search's figure on every corpus and
document shape for each value tried, from the indexes `jobs/bench_retrieval.py --keep DIR` built (run that first).
The test halves are never read here: report a chosen value with bench_retrieval.py, which prints both.

    python jobs/tune_ranking.py --keep DIR --setting focus_floor --values 0.02 0.05 0.1 0.2 1.0
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import bench_retrieval as bench  # noqa: E402


def titled_dev(root: Path, questions: list[dict], truth_key: str, score, k: int, ranking: dict) -> float:
    dev = bench.halves(questions)["dev"]
    got = asyncio.run(bench.our_titles(root, [q["question"] for q in dev], "local", k, ranking))
    return score(list(zip([q[truth_key] for q in dev], got)), k)


def evidence_dev(root: Path, questions: list[dict], k: int, ranking: dict) -> float:
    from graphrag_ray.api import open_index
    from graphrag_ray.nlp.lexical import tokens
    from graphrag_ray.query.factory import make_engine

    settings, data, models = open_index(root)
    units = data.text_units
    unit_words = {u["human_readable_id"]: set(tokens(u["text"])) for u in units.iter_rows(named=True)}
    chosen = settings.model_copy(deep=True)
    chosen.local_search.max_context_tokens = 2 * (k + 1) * int(units["n_tokens"].max())
    chosen.local_search.ranking = chosen.local_search.ranking.model_copy(update=ranking)
    engine = make_engine("local", data, models, chosen, root, no_llm=True)
    total = 0.0
    dev = bench.halves(questions)["dev"]
    for q in dev:
        got = [int(s["id"]) for s in asyncio.run(engine.context_only(q["question"])).context_data.get("sources", [])]
        statements = [set(tokens(s)) for s in q["evidence"].split("; ") if tokens(s)]
        covered = sum(
            1
            for words in statements
            if any(len(words & unit_words[u]) >= bench.STATEMENT_COVERED * len(words) for u in got[:k])
        )
        total += covered / len(statements) if statements else 1.0
    return total / len(dev)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keep", type=Path, required=True, help="the folder bench_retrieval.py --keep built")
    parser.add_argument("--setting", required=True)
    parser.add_argument("--values", type=float, nargs="+", required=True)
    parser.add_argument("--columns", nargs="*", default=[], help="only the columns whose names hold one of these")
    parser.add_argument("--fixed", nargs="*", default=[], help="other settings held at a value: NAME=VALUE")
    args = parser.parse_args()
    defaults = bench_ranking()
    fixed = {name: _typed(getattr(defaults, name), value) for name, value in (f.split("=", 1) for f in args.fixed)}
    wiki = json.loads((bench.DATA / "2wiki" / "questions.json").read_text(encoding="utf-8"))
    hotpot = json.loads((bench.DATA / "hotpotqa" / "questions.json").read_text(encoding="utf-8"))
    with gzip.open(bench.DATA / "graphrag_bench" / "medical_questions.json.gz", "rt", encoding="utf-8") as f:
        medical = json.load(f)
    with gzip.open(bench.DATA / "graphrag_bench" / "novel_questions.json.gz", "rt", encoding="utf-8") as f:
        novel = json.load(f)
    columns = []
    for shape in bench.SHAPES:
        for n in (51, 101):
            columns.append((f"2wiki-{n} {shape}", args.keep / f"2wiki-{n}-{shape}", "wiki", n))
        columns.append((f"hotpot@5 {shape}", args.keep / f"hotpotqa-{shape}", "hotpot", 5))
    columns += [(f"{name}@{k}", args.keep / name, name, k) for name in ("medical", "novel") for k in (5, 10)]
    for shape in bench.SHAPES:  # the standard method's graphs (the simulator's extraction), where --standard built them
        for n in (51, 101):
            columns.append((f"std 2wiki-{n} {shape}", args.keep / f"2wiki-{n}-{shape}-standard", "wiki", n))
    columns = [c for c in columns if (c[1] / "output").exists()]
    if args.columns:
        columns = [c for c in columns if any(part in c[0] for part in args.columns)]
    print(f"local search, dev halves only ({', '.join(args.fixed) or 'defaults'}), {args.setting} =")
    print(f"{'value':>8}" + "".join(f"{name:>20}" for name, *_ in columns))
    for value in args.values:
        ranking = {**fixed, args.setting: type(getattr(defaults, args.setting))(value)}
        figures = []
        for _, root, kind, n in columns:
            if kind == "wiki":
                questions = [{"question": q["question"], "truth": q["ground_truth"]} for q in wiki[str(n)]]
                figures.append(titled_dev(root, questions, "truth", lambda p, k: bench.perfect_share(p), 8, ranking))
            elif kind == "hotpot":
                figures.append(titled_dev(root, hotpot, "supporting", bench.recall_at, n, ranking))
            else:
                figures.append(evidence_dev(root, medical if kind == "medical" else novel, n, ranking))
        print(f"{value:8g}" + "".join(f"{f:20.4f}" for f in figures))
        sys.stdout.flush()


def _typed(default, text: str):
    """A value given on the command line as the setting's type (a word for a choice, else a number)."""
    return text if isinstance(default, str) else type(default)(float(text))


def bench_ranking():
    from graphrag_ray.config.ranking import RankingConfig

    return RankingConfig()


if __name__ == "__main__":
    main()
