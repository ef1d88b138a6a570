"""Benchmark: retrieval on public benchmarks, beside the peers' published figures.

2WikiMultiHopQA as fast-graphrag's benchmark runs it (circlemind-ai/fast-graphrag:benchmarks, MIT): the corpus is
the first N questions' context passages, deduplicated in first-seen order (421 for 51 questions, 780 for 101;
HippoRAG's 2wikimultihopqa_corpus.json holds them in that order), each inserted as "title: text"; a question
counts when every supporting passage's title is among the first 8 retrieved passages. Their scorer is re-run on
their own result files first (it must print their published figures). Then our index, offline - the `fast`
method, `type: local_embedding`, no chat endpoint - and our basic and local search (context only, no answer
call), and BM25 (bm25s, lower-cased words, no stop words) at the same k.

GraphRAG-Bench Medical (yishanyuan/GraphRAG-Benchmark, MIT: the corpus and each question's evidence statements):
one ~1 MB document in our default text units; a statement counts as retrieved when at least 80 % of its words
(the lexical index's: case-folded, no stop words) are in one of the k retrieved text units; a question's evidence
recall is the share of its statements retrieved, and the figure is the mean over the questions.

Data: jobs/data/2wiki and jobs/data/graphrag_bench (derived from those repositories; see their READMEs).

    python jobs/bench_retrieval.py [--sizes 51 101] [--k 8] [--medical-k 10] [--medical-questions 2062] [--keep DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import yaml

DATA = Path(__file__).parent / "data" / "2wiki"
MEDICAL = Path(__file__).parent / "data" / "graphrag_bench"
STATEMENT_COVERED = 0.8
CORPUS_SIZE = {51: 421, 101: 780}
PUBLISHED = {
    "graph": "fast-graphrag (gpt-4o-mini, OpenAI embeddings, PPR)",
    "nano": "nano-graphrag local (GraphRAG)",
    "vdb": "vector DB, text-embedding-3-small",
    "lightrag": "LightRAG local",
}


def perfect_share(rows: list[tuple[list[str], list[str]]]) -> float:
    """fast-graphrag's scorer: the share of questions whose every ground-truth title was retrieved."""
    return sum(1 for truth, got in rows if set(truth) <= set(got)) / len(rows)


def passages() -> list[dict]:
    with gzip.open(DATA / "corpus_780.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def project(root: Path, corpus: list[dict]) -> Path:
    (root / "input").mkdir(parents=True)
    pl.DataFrame(
        {
            "id": [f"p{i:04d}" for i in range(len(corpus))],
            "title": [p["title"] for p in corpus],
            "text": [f"{p['title']}: {p['text']}" for p in corpus],
        }
    ).write_csv(root / "input" / "corpus.csv")
    return project_settings(root)


def project_settings(root: Path, chat_base: str = "http://127.0.0.1:9/v1") -> Path:
    """An offline project: local embeddings, and a chat model that is never called (context only) - or, for the
    standard method, the simulator at `chat_base`."""
    chat = {"api_base": chat_base, "model": "gpt-4o-mini"}
    if not chat_base.endswith(":9/v1"):
        chat |= {"api_key": "sk-bench", "request_timeout": 60, "stream_requests": "never"}
    settings = {
        "models": {"default_chat": chat, "default_embedding": {"type": "local_embedding", "model": "local"}},
        "workers": {"executor": "local"},
    }
    (root / "settings.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
    return root


def bm25_titles(corpus: list[dict], questions: list[str], k: int) -> list[list[str]]:
    import bm25s

    words = re.compile(r"\w+")
    retriever = bm25s.BM25()
    retriever.index([words.findall(f"{p['title']}: {p['text']}".lower()) for p in corpus], show_progress=False)
    vocab = set(retriever.vocab_dict)
    found = []
    for q in questions:
        tokens = [t for t in words.findall(q.lower()) if t in vocab] or ["the"]
        ids, _ = retriever.retrieve([tokens], k=k, show_progress=False)
        found.append([corpus[i]["title"] for i in ids[0]])
    return found


async def our_titles(root: Path, questions: list[str], method: str, k: int) -> list[list[str]]:
    from graphrag_ray.api import open_index
    from graphrag_ray.query.factory import make_engine

    settings, data, models = open_index(root)
    titles = {r["id"]: r["title"] for r in pl.read_csv(root / "input" / "corpus.csv").iter_rows(named=True)}
    unit_document = dict(zip(data.text_units["human_readable_id"].to_list(), data.text_units["document_id"].to_list()))
    documents = _document_titles(root)
    engine = make_engine(method, data, models, settings, root, no_llm=True)
    found = []
    for q in questions:
        result = await engine.context_only(q)
        got: list[str] = []
        for source in result.context_data.get("sources", []):
            title = documents.get(unit_document.get(int(source["id"])))
            if title and title not in got:
                got.append(title)
        found.append(got[:k])
    assert titles  # the input the index was built from
    return found


def medical(work: Path, k: int, limit: int) -> dict:
    """Evidence recall at k text units on GraphRAG-Bench Medical: BM25 over the same units, our basic and local."""
    import bm25s

    from graphrag_ray.api import build_index, open_index
    from graphrag_ray.nlp.lexical import tokens
    from graphrag_ray.query.factory import make_engine

    with gzip.open(MEDICAL / "medical_questions.json.gz", "rt", encoding="utf-8") as f:
        questions = json.load(f)[:limit]
    root = work / "medical"
    if not (root / "output").exists():
        (root / "input").mkdir(parents=True, exist_ok=True)
        with gzip.open(MEDICAL / "medical_corpus.txt.gz", "rt", encoding="utf-8") as f:
            (root / "input" / "medical.txt").write_text(f.read(), encoding="utf-8")
        project_settings(root)
        build_index(root=root, method="fast")
    settings, data, models = open_index(root)
    units = data.text_units.sort("human_readable_id")
    unit_words = {u["human_readable_id"]: set(tokens(u["text"])) for u in units.iter_rows(named=True)}

    def recall(evidence: str, got: list[int]) -> float:
        statements = [set(tokens(s)) for s in evidence.split("; ") if tokens(s)]
        covered = sum(
            1 for words in statements if any(len(words & unit_words[u]) >= STATEMENT_COVERED * len(words) for u in got)
        )
        return covered / len(statements) if statements else 1.0

    words = re.compile(r"\w+")
    plain = bm25s.BM25()
    ids = units["human_readable_id"].to_list()
    plain.index([words.findall(t.lower()) for t in units["text"].to_list()], show_progress=False)
    vocab = set(plain.vocab_dict)
    row = {"questions": len(questions), "units": units.height}
    scores = []
    for q in questions:
        found, _ = plain.retrieve(
            [[t for t in words.findall(q["question"].lower()) if t in vocab] or ["the"]], k=k, show_progress=False
        )
        scores.append(recall(q["evidence"], [ids[i] for i in found[0]]))
    row["bm25"] = sum(scores) / len(scores)

    async def ours(method: str, budget: int | None = None) -> tuple[float, float]:
        """(mean evidence recall, mean text units given, at most k)"""
        chosen = settings
        if budget:  # room for k text units: the ranking at k, not what the default budget packs
            chosen = settings.model_copy(deep=True)
            chosen.local_search.max_context_tokens = chosen.basic_search.max_context_tokens = budget
        engine = make_engine(method, data, models, chosen, root, no_llm=True)
        total, given = 0.0, 0
        for q in questions:
            result = await engine.context_only(q["question"])
            got = [int(s["id"]) for s in result.context_data.get("sources", [])][:k]
            total, given = total + recall(q["evidence"], got), given + len(got)
        return total / len(questions), given / len(questions)

    # room for k whole text units: local search gives text units half of its budget, and the Sources table's header
    # and ids take some of it (k units exactly left local search with k - 1 on most questions)
    room = 2 * (k + 1) * int(units["n_tokens"].max())
    for method in ("basic", "local"):
        row[f"ours_{method}"], row[f"ours_{method}_units"] = asyncio.run(ours(method, room))
        row[f"ours_{method}_default"], row[f"ours_{method}_default_units"] = asyncio.run(ours(method))
    return row


def _document_titles(root: Path) -> dict[str, str]:
    from graphrag_ray.storage.tables import current_index, read_table

    docs = read_table(current_index(root / "output"), "documents")
    return dict(zip(docs["id"].to_list(), docs["title"].to_list()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[51, 101])
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--standard", action="store_true", help="also the standard method, against the simulator")
    parser.add_argument("--medical-k", type=int, default=10)
    parser.add_argument("--medical-questions", type=int, default=2062)
    parser.add_argument("--keep", type=Path, help="build the indexes here and keep them")
    args = parser.parse_args()

    from graphrag_ray.api import build_index

    questions_by_size = json.loads((DATA / "questions.json").read_text(encoding="utf-8"))
    with gzip.open(DATA / "peer_results.json.gz", "rt", encoding="utf-8") as f:
        peers = json.load(f)
    corpus = passages()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-retrieval-"))
    table = []
    for n in args.sizes:
        questions = questions_by_size[str(n)]
        truth = [q["ground_truth"] for q in questions]
        text = [q["question"] for q in questions]
        row = {"questions": n}
        for method in PUBLISHED:  # their scorer on their files: reproduces the published figure
            row[method] = perfect_share([(a["ground_truth"], a["evidence"]) for a in peers[f"{method}_{n}"]])
        sub = corpus[: CORPUS_SIZE[n]]
        row["bm25"] = perfect_share(list(zip(truth, bm25_titles(sub, text, args.k))))
        root = work / f"2wiki-{n}"
        if root.exists() and not args.keep:
            shutil.rmtree(root)
        if not (root / "output").exists():
            project(root, sub)
            started = time.perf_counter()
            build_index(root=root, method="fast")
            row["index_s"] = time.perf_counter() - started
        for method in ("basic", "local"):
            started = time.perf_counter()
            got = asyncio.run(our_titles(root, text, method, args.k))
            row[f"ours_{method}"] = perfect_share(list(zip(truth, got)))
            row[f"ours_{method}_ms"] = 1000 * (time.perf_counter() - started) / len(text)
        if args.standard:  # the LLM graph, its extraction by the simulator (no real model is reachable here)
            from graphrag_ray.simulate.process import SimulatorProcess

            standard = work / f"2wiki-{n}-standard"
            with SimulatorProcess() as sim:
                if not (standard / "output").exists():
                    project(standard, sub)
                    project_settings(standard, sim.base_url)
                    build_index(root=standard, method="standard")
                got = asyncio.run(our_titles(standard, text, "local", args.k))
            row["standard_local"] = perfect_share(list(zip(truth, got)))
        table.append(row)
    print(f"2WikiMultiHopQA: share of questions with every supporting passage among the first {args.k} retrieved")
    print(f"{'method':58}" + "".join(f"{r['questions']:>8}" for r in table))
    for key, label in [
        *PUBLISHED.items(),
        ("bm25", f"BM25 top {args.k} (bm25s, lower-cased words)"),
        ("ours_basic", f"ours, basic search, top {args.k} (offline)"),
        ("ours_local", f"ours, local search, first {args.k} Sources (offline)"),
        *([("standard_local", "ours, standard method (simulator), local, first 8")] if args.standard else []),
    ]:
        print(f"{label:58}" + "".join(f"{r[key]:8.2f}" for r in table))
    for r in table:
        print(
            f"  {r['questions']} questions: fast index {r.get('index_s', 0):.1f}s; per question basic "
            f"{r['ours_basic_ms']:.0f} ms, local {r['ours_local_ms']:.0f} ms (context built, no answer call)"
        )
    if args.medical_questions:
        m = medical(work, args.medical_k, args.medical_questions)
        print(
            f"\nGraphRAG-Bench Medical ({m['questions']} questions, {m['units']} text units): mean evidence recall at "
            f"{args.medical_k} text units (a statement: {STATEMENT_COVERED:.0%} of its words in one unit)"
        )
        for key, label in (
            ("bm25", f"BM25 top {args.medical_k}"),
            ("ours_basic", f"ours, basic search, top {args.medical_k} (offline)"),
            ("ours_local", f"ours, local search, first {args.medical_k} Sources (offline)"),
            ("ours_basic_default", "ours, basic search, as its default budget packs (offline)"),
            ("ours_local_default", "ours, local search, as its default budget packs (offline)"),
        ):
            given = f"   ({m[key + '_units']:.1f} text units per question)" if key + "_units" in m else ""
            print(f"{label:58}{m[key]:8.4f}{given}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
