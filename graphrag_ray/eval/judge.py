"""Pairwise LLM-as-judge on the GraphRAG paper's criteria; every pair judged in both orders (position bias
cancels), ties allowed. Judgments are stored per (question, pair, order), so a re-run judges only what is new."""

from __future__ import annotations

import asyncio
import itertools
import math
from pathlib import Path

import polars as pl

from graphrag_ray.config.prompts import fill, load_prompt
from graphrag_ray.errors import GraphRagRayError
from graphrag_ray.eval.runner import read_parts, write_part
from graphrag_ray.index.parsing import parse_json_object

CRITERIA = ("comprehensiveness", "diversity", "empowerment", "directness")
JUDGE_PROMPT = "prompts/eval_judge.txt"
JUDGMENT_SCHEMA = {"question_id": pl.String, "method_a": pl.String, "method_b": pl.String, "order": pl.Int64,
                   **{c: pl.Float64 for c in CRITERIA}}


def _score_for_a(verdict: dict, criterion: str, a_is_first: bool) -> float:
    """1 if method A won this criterion, 0 if it lost, 0.5 for a tie or an unusable verdict."""
    try:
        winner = int((verdict.get(criterion) or {}).get("winner", 0))
    except (TypeError, ValueError):
        winner = 0
    if winner not in (1, 2):
        return 0.5
    return 1.0 if (winner == 1) == a_is_first else 0.0


async def judge_all(models, settings, root: Path, questions: pl.DataFrame, answers: pl.DataFrame,
                    methods: list[str], out: Path, concurrency: int = 16) -> pl.DataFrame:
    folder = out / "judgments"
    done = read_parts(folder, JUDGMENT_SCHEMA)
    seen = set(zip(done["question_id"].to_list(), done["method_a"].to_list(), done["method_b"].to_list(),
                   done["order"].to_list()))
    text = {(r["question_id"], r["method"]): r["answer"] for r in answers.iter_rows(named=True)}
    template = load_prompt(root, JUDGE_PROMPT)
    chat = models.chat(settings.global_search.chat_model_id)
    gate = asyncio.Semaphore(concurrency)
    jobs = [(q["question_id"], q["question"], a, b, order)
            for q in questions.iter_rows(named=True) for a, b in itertools.combinations(methods, 2)
            for order in (0, 1) if (q["question_id"], a, b, order) not in seen
            and text.get((q["question_id"], a)) and text.get((q["question_id"], b))]

    async def judge(qid, question, a, b, order):
        first, second = (a, b) if order == 0 else (b, a)
        prompt = fill(template, question=question, answer_1=text[(qid, first)], answer_2=text[(qid, second)])
        async with gate:
            try:
                reply = await chat.chat([{"role": "user", "content": prompt}], stage="eval_judge", json_mode=True)
                verdict = parse_json_object(reply.content) or {}
            except GraphRagRayError:
                verdict = {}
        return {"question_id": qid, "method_a": a, "method_b": b, "order": order,
                **{c: _score_for_a(verdict, c, order == 0) for c in CRITERIA}}

    rows = await asyncio.gather(*(judge(*job) for job in jobs))
    for start in range(0, len(rows), 64):
        write_part(folder, rows[start:start + 64], JUDGMENT_SCHEMA)
    return read_parts(folder, JUDGMENT_SCHEMA)


def win_rates(judgments: pl.DataFrame) -> pl.DataFrame:
    """Per (method_a, method_b, criterion): A's win rate over questions (both orders averaged; a tie is 0.5)
    with a 95% confidence interval (normal approximation on the per-question scores)."""
    rows = []
    if judgments.height == 0:
        return pl.DataFrame(schema={"method_a": pl.String, "method_b": pl.String, "criterion": pl.String,
                                    "win_rate": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64,
                                    "questions": pl.Int64})
    per_question = judgments.group_by("question_id", "method_a", "method_b").agg(
        [pl.col(c).mean() for c in CRITERIA])
    for (a, b), group in per_question.group_by(["method_a", "method_b"], maintain_order=True):
        for criterion in CRITERIA:
            scores = group[criterion].to_list()
            n = len(scores)
            mean = sum(scores) / n
            sd = math.sqrt(sum((s - mean) ** 2 for s in scores) / (n - 1)) if n > 1 else 0.0
            half = 1.96 * sd / math.sqrt(n) if n > 1 else 0.5
            rows.append({"method_a": a, "method_b": b, "criterion": criterion, "win_rate": round(mean, 4),
                         "ci_low": round(max(0.0, mean - half), 4), "ci_high": round(min(1.0, mean + half), 4),
                         "questions": n})
    return pl.DataFrame(rows).sort("method_a", "method_b", "criterion")
