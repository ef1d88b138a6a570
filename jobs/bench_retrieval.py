"""Benchmark: retrieval on public benchmarks, beside the peers' published figures - every corpus in every document
shape, every question set in a dev half (tune there) and a test half (report there; never tuned on).

Document shapes: a titled passage is written `Title: text` (fast-graphrag's 2Wiki files) or `Title\ntext` (HippoRAG's
files, Markdown, wiki dumps: the title on its own line). GraphRAG-Bench's corpora are long untitled documents: one
shape. Halves: a question set's even positions are the dev half, its odd positions the test half.

2WikiMultiHopQA as fast-graphrag's benchmark runs it (circlemind-ai/fast-graphrag:benchmarks, MIT): the corpus is
the first N questions' context passages, deduplicated in first-seen order (421 for 51 questions, 780 for 101); a
question counts when every supporting passage's title is among the first 8 retrieved passages. Their scorer is re-run
on their own result files first (it must print their published figures, on all their questions).

HotpotQA (HippoRAG's legacy `hotpotqa_train`: 100 questions, 994 passages): recall@2 and recall@5 of the supporting
passages (HippoRAG's metric), averaged over the questions.

GraphRAG-Bench Medical (one ~1 MB document) and Novel (20 novels, ~1.2 M tokens) (yishanyuan/GraphRAG-Benchmark,
MIT): a statement of a question's evidence counts as retrieved when at least 80 % of its words (the lexical index's:
case-folded, no stop words) are in one of the k retrieved text units; a question's evidence recall is the share of
its statements retrieved; the figure is the mean over the questions.

Ours: the `fast` method offline (`type: local_embedding`, no chat endpoint), basic and local search, context only (no
answer call); BM25 (bm25s, lower-cased words) over the same passages / text units at the same k.

Data: jobs/data/{2wiki,hotpotqa,graphrag_bench} (derived from those repositories; see their READMEs).

    python jobs/bench_retrieval.py [--corpora 2wiki hotpotqa medical novel] [--shapes colon newline] [--standard]
                                   [--keep DIR]
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

DATA = Path(__file__).parent / "data"
STATEMENT_COVERED = 0.8
CORPUS_SIZE = {51: 421, 101: 780}
SHAPES = {"colon": "{title}: {text}", "newline": "{title}\n{text}"}
PUBLISHED = {
    "graph": "fast-graphrag (gpt-4o-mini, OpenAI embeddings, PPR)",
    "nano": "nano-graphrag local (GraphRAG)",
    "vdb": "vector DB, text-embedding-3-small",
    "lightrag": "LightRAG local",
}
HALVES = ("dev", "test")


def halves(items: list) -> dict[str, list]:
    """The dev half (even positions: tune here) and the test half (odd positions: report here)."""
    return {"dev": items[0::2], "test": items[1::2]}


def perfect_share(rows: list[tuple[list[str], list[str]]]) -> float:
    """fast-graphrag's scorer: the share of questions whose every ground-truth title was retrieved."""
    return sum(1 for truth, got in rows if set(truth) <= set(got)) / max(1, len(rows))


def recall_at(rows: list[tuple[list[str], list[str]]], k: int) -> float:
    """HippoRAG's recall@k: the share of a question's supporting titles among the first k retrieved, averaged."""
    return sum(len(set(truth) & set(got[:k])) / len(set(truth)) for truth, got in rows) / max(1, len(rows))


def read_jsonl(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def project(root: Path, corpus: list[dict], shape: str) -> Path:
    """A project whose input is the titled passages written in `shape`."""
    (root / "input").mkdir(parents=True)
    pl.DataFrame(
        {
            "id": [f"p{i:04d}" for i in range(len(corpus))],
            "title": [p["title"] for p in corpus],
            "text": [SHAPES[shape].format(title=p["title"], text=p["text"]) for p in corpus],
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


def built(root: Path, make, method: str = "fast") -> float:
    """Seconds to build the index at `root` (made by `make(root)` first); 0 when it was kept from a run before."""
    from graphrag_ray.api import build_index

    if (root / "output").exists():
        return 0.0
    make(root)
    started = time.perf_counter()
    build_index(root=root, method=method)
    return time.perf_counter() - started


def bm25_titles(corpus: list[dict], shape: str, questions: list[str], k: int) -> list[list[str]]:
    import bm25s

    words = re.compile(r"\w+")
    retriever = bm25s.BM25()
    retriever.index([words.findall(SHAPES[shape].format(**p).lower()) for p in corpus], show_progress=False)
    vocab = set(retriever.vocab_dict)
    found = []
    for q in questions:
        tokens = [t for t in words.findall(q.lower()) if t in vocab] or ["the"]
        ids, _ = retriever.retrieve([tokens], k=k, show_progress=False)
        found.append([corpus[i]["title"] for i in ids[0]])
    return found


async def our_titles(
    root: Path, questions: list[str], method: str, k: int, ranking: dict | None = None
) -> list[list[str]]:
    """The titles of the first k passages a method gives (its Sources, in order), per question; `ranking`: settings
    of local_search.ranking changed (jobs/tune_ranking.py)."""
    from graphrag_ray.api import open_index
    from graphrag_ray.query.factory import make_engine

    settings, data, models = open_index(root)
    if ranking:
        settings.local_search.ranking = settings.local_search.ranking.model_copy(update=ranking)
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
    return found


def titled(name: str, corpus: list[dict], questions: list[dict], truth_key: str, score, ks: list[int], args, work):
    """One corpus of titled passages: every shape, both halves; BM25, basic and local (and the standard method)."""
    rows = []
    text = [q["question"] for q in questions]
    truth = [q[truth_key] for q in questions]
    for shape in args.shapes:
        row = {"corpus": name, "shape": shape}
        root = work / f"{name}-{shape}"
        row["index_s"] = built(root, lambda r, shape=shape: project(r, corpus, shape))
        got = {"bm25": bm25_titles(corpus, shape, text, max(ks))}
        for method in ("basic", "local"):
            started = time.perf_counter()
            got[method] = asyncio.run(our_titles(root, text, method, max(ks)))
            row[f"{method}_ms"] = 1000 * (time.perf_counter() - started) / len(text)
        if args.standard:  # the LLM graph, its extraction by the simulator (no real model is reachable here)
            from graphrag_ray.simulate.process import SimulatorProcess

            standard = work / f"{name}-{shape}-standard"
            with SimulatorProcess() as sim:
                built(
                    standard,
                    lambda r, shape=shape: project_settings(project(r, corpus, shape), sim.base_url),
                    "standard",
                )
                got["standard"] = asyncio.run(our_titles(standard, text, "local", max(ks)))
        for method, found in got.items():
            pairs = list(zip(truth, found))
            for half, chosen in halves(pairs).items():
                for k in ks:
                    row[f"{method}@{k}/{half}"] = score(chosen, k)
        rows.append(row)
    return rows


def two_wiki(args, work) -> list[dict]:
    corpus = read_jsonl(DATA / "2wiki" / "corpus_780.jsonl.gz")
    by_size = json.loads((DATA / "2wiki" / "questions.json").read_text(encoding="utf-8"))
    rows = []
    for n in args.sizes:
        questions = [{"question": q["question"], "truth": q["ground_truth"]} for q in by_size[str(n)]]
        rows += titled(
            f"2wiki-{n}",
            corpus[: CORPUS_SIZE[n]],
            questions,
            "truth",
            lambda pairs, k: perfect_share([(t, g[:k]) for t, g in pairs]),
            [8],
            args,
            work,
        )
    return rows


def hotpotqa(args, work) -> list[dict]:
    corpus = read_jsonl(DATA / "hotpotqa" / "corpus.jsonl.gz")
    questions = json.loads((DATA / "hotpotqa" / "questions.json").read_text(encoding="utf-8"))
    return titled("hotpotqa", corpus, questions, "supporting", recall_at, [2, 5], args, work)


def evidence(name: str, documents: list[tuple[str, str]], questions: list[dict], ks: list[int], work) -> dict:
    """Evidence recall at k text units on a GraphRAG-Bench corpus: BM25 over the same units, our basic and local."""
    import bm25s

    from graphrag_ray.api import open_index
    from graphrag_ray.nlp.lexical import tokens
    from graphrag_ray.query.factory import make_engine

    root = work / name

    def make(r: Path) -> None:
        (r / "input").mkdir(parents=True, exist_ok=True)
        for file_name, text in documents:
            (r / "input" / f"{file_name}.txt").write_text(text, encoding="utf-8")
        project_settings(r)

    row = {"corpus": name, "shape": "untitled", "index_s": built(root, make)}
    settings, data, models = open_index(root)
    units = data.text_units.sort("human_readable_id")
    unit_words = {u["human_readable_id"]: set(tokens(u["text"])) for u in units.iter_rows(named=True)}
    row["units"] = units.height

    def recall(statements_text: str, got: list[int]) -> float:
        statements = [set(tokens(s)) for s in statements_text.split("; ") if tokens(s)]
        covered = sum(
            1 for words in statements if any(len(words & unit_words[u]) >= STATEMENT_COVERED * len(words) for u in got)
        )
        return covered / len(statements) if statements else 1.0

    words = re.compile(r"\w+")
    plain = bm25s.BM25()
    ids = units["human_readable_id"].to_list()
    plain.index([words.findall(t.lower()) for t in units["text"].to_list()], show_progress=False)
    vocab = set(plain.vocab_dict)
    got: dict[str, list[list[int]]] = {"bm25": []}
    for q in questions:
        found, _ = plain.retrieve(
            [[t for t in words.findall(q["question"].lower()) if t in vocab] or ["the"]], k=max(ks), show_progress=False
        )
        got["bm25"].append([ids[i] for i in found[0]])
    # room for k whole text units: local search gives text units half of its budget, and the Sources table's header
    # and ids take some of it
    chosen = settings.model_copy(deep=True)
    chosen.local_search.max_context_tokens = chosen.basic_search.max_context_tokens = (
        2 * (max(ks) + 1) * int(units["n_tokens"].max())
    )
    for method in ("basic", "local"):
        engine = make_engine(method, data, models, chosen, root, no_llm=True)
        started, got[method] = time.perf_counter(), []
        for q in questions:
            result = asyncio.run(engine.context_only(q["question"]))
            got[method].append([int(s["id"]) for s in result.context_data.get("sources", [])])
        row[f"{method}_ms"] = 1000 * (time.perf_counter() - started) / len(questions)
    for method, found in got.items():
        for half, chosen_rows in halves(list(zip(questions, found))).items():
            for k in ks:
                row[f"{method}@{k}/{half}"] = sum(recall(q["evidence"], f[:k]) for q, f in chosen_rows) / len(
                    chosen_rows
                )
    return row


def medical(args, work) -> list[dict]:
    with gzip.open(DATA / "graphrag_bench" / "medical_questions.json.gz", "rt", encoding="utf-8") as f:
        questions = json.load(f)[: args.questions]
    with gzip.open(DATA / "graphrag_bench" / "medical_corpus.txt.gz", "rt", encoding="utf-8") as f:
        documents = [("medical", f.read())]
    return [evidence("medical", documents, questions, [5, 10], work)]


def novel(args, work) -> list[dict]:
    with gzip.open(DATA / "graphrag_bench" / "novel_questions.json.gz", "rt", encoding="utf-8") as f:
        questions = json.load(f)[: args.questions]
    documents = [(d["name"], d["text"]) for d in read_jsonl(DATA / "graphrag_bench" / "novel_corpus.jsonl.gz")]
    return [evidence("novel", documents, questions, [5, 10], work)]


def _document_titles(root: Path) -> dict[str, str]:
    from graphrag_ray.storage.tables import current_index, read_table

    docs = read_table(current_index(root / "output"), "documents")
    return dict(zip(docs["id"].to_list(), docs["title"].to_list()))


def report(rows: list[dict]) -> None:
    """One line per corpus, shape, metric and method: dev and test halves side by side; the test half is the figure."""
    print(f"{'corpus':12}{'shape':10}{'metric':16}{'method':10}{'dev':>8}{'test':>8}   local - basic (test)")
    for row in rows:
        metrics = sorted({key.split("/")[0].split("@")[1] for key in row if "@" in key}, key=int)
        methods = [m for m in ("bm25", "basic", "local", "standard") if any(k.startswith(m + "@") for k in row)]
        for k in metrics:
            for method in methods:
                dev, test = row[f"{method}@{k}/dev"], row[f"{method}@{k}/test"]
                gap = ""
                if method == "local":
                    delta = test - row[f"basic@{k}/test"]
                    gap = f"   {delta:+.4f}" + ("   LOSS" if delta < 0 else "")
                metric = (
                    "all-in-8"
                    if row["corpus"].startswith("2wiki")
                    else (f"recall@{k}" if row["corpus"] == "hotpotqa" else f"evidence@{k}")
                )
                print(f"{row['corpus']:12}{row['shape']:10}{metric:16}{method:10}{dev:8.4f}{test:8.4f}{gap}")
        timing = f"index {row.get('index_s', 0):.1f}s (0: kept), per question basic {row['basic_ms']:.0f} ms, local {row['local_ms']:.0f} ms"
        print(f"{'':12}{'':10}{timing}")


def peers_line(sizes: list[int]) -> None:
    with gzip.open(DATA / "2wiki" / "peer_results.json.gz", "rt", encoding="utf-8") as f:
        peers = json.load(f)
    print("2WikiMultiHopQA, the peers' published figures (all questions; their files re-scored with their rule):")
    for method, label in PUBLISHED.items():
        figures = "  ".join(
            f"{n}: {perfect_share([(a['ground_truth'], a['evidence']) for a in peers[f'{method}_{n}']]):.2f}"
            for n in sizes
        )
        print(f"  {label:56}{figures}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpora", nargs="+", default=["2wiki", "hotpotqa", "medical", "novel"])
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--sizes", type=int, nargs="+", default=[51, 101])
    parser.add_argument("--questions", type=int, default=100_000, help="GraphRAG-Bench: at most this many questions")
    parser.add_argument("--standard", action="store_true", help="also the standard method, against the simulator")
    parser.add_argument("--keep", type=Path, help="build the indexes here and keep them")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-retrieval-"))
    runs = {"2wiki": two_wiki, "hotpotqa": hotpotqa, "medical": medical, "novel": novel}
    if "2wiki" in args.corpora:
        peers_line(args.sizes)
    rows = []
    for name in args.corpora:
        rows += runs[name](args, work)
    print()
    report(rows)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
