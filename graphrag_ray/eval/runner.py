"""Bulk evaluation's two item steps, run by the same executor as index steps (exec/): answers to every
(question, method) pair, then pairwise judgments. In this process for small jobs, on Ray actors sharing the job's
rate limiter when there is a cluster; completed partitions are recorded, so a re-run answers and judges only what
is new. `evidence` is the no-LLM baseline (local context, extractive answer)."""

from __future__ import annotations

import functools
import itertools
import time

import polars as pl

from graphrag_ray.config.prompts import fill
from graphrag_ray.errors import GraphRagRayError
from graphrag_ray.exec.step import ItemStep, Rows, StepContext, Tables
from graphrag_ray.parsing.llm_output import parse_json_object
from graphrag_ray.query.index_data import IndexData

ANSWER_SCHEMA = {
    "question_id": pl.String,
    "method": pl.String,
    "answer": pl.String,
    "source_ids": pl.List(pl.String),
    "report_ids": pl.List(pl.String),
    "latency_s": pl.Float64,
    "llm_calls": pl.Int64,
    "prompt_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "cost": pl.Float64,
    "error": pl.String,
}
CRITERIA = ("comprehensiveness", "diversity", "empowerment", "directness")
JUDGMENT_SCHEMA = {
    "question_id": pl.String,
    "method_a": pl.String,
    "method_b": pl.String,
    "order": pl.Int64,
    **{c: pl.Float64 for c in CRITERIA},
}
JUDGE_PROMPT = "prompts/eval_judge.txt"


@functools.lru_cache(maxsize=4)
def loaded_index(location: str) -> IndexData:
    """One loaded index per process (a worker answers many questions from it)."""
    return IndexData.load(location)


class AnswerQuestions(ItemStep):
    name = "answer_questions"
    reads = ("questions",)
    writes = ("answers",)
    yields = {"answers": ANSWER_SCHEMA}
    partition_size = 8  # answered at once per partition; two partitions in flight per worker

    def __init__(self, index_location: str, methods: list[str]):
        self.index_location = index_location
        self.methods = list(methods)

    def items(self, ctx: StepContext, tables: Tables, round_index: int, earlier: Tables) -> list[dict]:
        return [
            {
                "item_id": f"{q['question_id']}\x1f{m}",
                "question_id": q["question_id"],
                "question": q["question"],
                "method": m,
            }
            for q in tables["questions"].iter_rows(named=True)
            for m in self.methods
        ]

    async def process(self, ctx: StepContext, item: dict, models) -> Rows:
        from graphrag_ray.query.factory import make_engine

        data = loaded_index(self.index_location)
        method = item["method"]
        level = min(ctx.settings.query.community_level, data.max_level)
        started = time.perf_counter()
        row = {"question_id": item["question_id"], "method": method}
        try:
            engine = make_engine(
                "local" if method == "evidence" else method,
                data,
                models,
                ctx.settings,
                ctx.root,
                community_level=level,
                no_llm=method == "evidence",
            )
            result = await engine.search(item["question"])
        except GraphRagRayError as exc:
            self.stat_update("errors")
            return {
                "answers": [
                    {
                        **row,
                        "answer": "",
                        "source_ids": [],
                        "report_ids": [],
                        "latency_s": time.perf_counter() - started,
                        "llm_calls": 0,
                        "prompt_tokens": 0,
                        "output_tokens": 0,
                        "cost": 0.0,
                        "error": str(exc),
                    }
                ]
            }
        found = result.context_data
        return {
            "answers": [
                {
                    **row,
                    "answer": result.response,
                    # None: the method's context holds no passages (global search cites reports), so the
                    # evidence recall of its passages cannot be measured - n/a, not 0
                    "source_ids": [str(r["id"]) for r in found["sources"]] if "sources" in found else None,
                    "report_ids": [str(r["id"]) for r in found.get("reports", []) + found.get("global_reports", [])],
                    "latency_s": result.completion_time,
                    "llm_calls": result.llm_calls,
                    "prompt_tokens": result.prompt_tokens,
                    "output_tokens": result.output_tokens,
                    "cost": result.cost,
                    "error": None,
                }
            ]
        }

    def finish(self, ctx: StepContext, tables: Tables, yielded: Tables) -> Tables:
        return {
            "answers": yielded["answers"].unique(["question_id", "method"], keep="first").sort("question_id", "method")
        }


class JudgeAnswers(ItemStep):
    """Pairwise LLM-as-judge on the GraphRAG paper's criteria; every pair judged in both orders (position bias
    cancels), ties allowed."""

    name = "judge_answers"
    reads = ("questions", "answers")
    writes = ("judgments",)
    yields = {"judgments": JUDGMENT_SCHEMA}
    partition_size = 16
    uses_llm = True

    def __init__(self, methods: list[str]):
        self.methods = list(methods)

    def model_ids(self, settings) -> list[str]:
        return [settings.global_search.chat_model_id]

    def prompts(self, settings, update: bool = False) -> list[str]:
        return [JUDGE_PROMPT]

    def items(self, ctx: StepContext, tables: Tables, round_index: int, earlier: Tables) -> list[dict]:
        text = {(r["question_id"], r["method"]): r["answer"] for r in tables["answers"].iter_rows(named=True)}
        return [
            {
                "item_id": f"{q['question_id']}\x1f{a}\x1f{b}\x1f{order}",
                "question_id": q["question_id"],
                "question": q["question"],
                "method_a": a,
                "method_b": b,
                "order": order,
                "first": text[(q["question_id"], a if order == 0 else b)],
                "second": text[(q["question_id"], b if order == 0 else a)],
            }
            for q in tables["questions"].iter_rows(named=True)
            for a, b in itertools.combinations(self.methods, 2)
            for order in (0, 1)
            if text.get((q["question_id"], a)) and text.get((q["question_id"], b))
        ]

    async def process(self, ctx: StepContext, item: dict, models) -> Rows:
        chat = models.chat(ctx.settings.global_search.chat_model_id)
        prompt = fill(
            ctx.prompt(JUDGE_PROMPT), question=item["question"], answer_1=item["first"], answer_2=item["second"]
        )
        try:
            reply = await chat.chat([{"role": "user", "content": prompt}], stage="eval_judge", json_mode=True)
            verdict = parse_json_object(reply.content) or {}
        except GraphRagRayError:
            self.stat_update("unjudged")
            verdict = {}
        return {
            "judgments": [
                {
                    "question_id": item["question_id"],
                    "method_a": item["method_a"],
                    "method_b": item["method_b"],
                    "order": item["order"],
                    **{c: score_for_a(verdict, c, item["order"] == 0) for c in CRITERIA},
                }
            ]
        }

    def finish(self, ctx: StepContext, tables: Tables, yielded: Tables) -> Tables:
        return {"judgments": yielded["judgments"].sort("question_id", "method_a", "method_b", "order")}


def score_for_a(verdict: dict, criterion: str, a_is_first: bool) -> float:
    """1 if method A won this criterion, 0 if it lost, 0.5 for a tie or an unusable verdict."""
    try:
        winner = int((verdict.get(criterion) or {}).get("winner", 0))
    except (TypeError, ValueError):
        winner = 0
    if winner not in (1, 2):
        return 0.5
    return 1.0 if (winner == 1) == a_is_first else 0.0
