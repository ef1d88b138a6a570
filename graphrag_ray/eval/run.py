"""`graphrag-ray eval` / jobs/eval.py: questions -> answers -> judgments -> report, all resumable."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from graphrag_ray.config.load import load_settings
from graphrag_ray.errors import GraphRagRayError
from graphrag_ray.eval.judge import judge_all, win_rates
from graphrag_ray.eval.metrics import gold_metrics
from graphrag_ray.eval.questions import generate_questions, load_questions
from graphrag_ray.eval.report import write_report
from graphrag_ray.eval.runner import EVAL_METHODS, answer_all
from graphrag_ray.llm.client import run as run_async
from graphrag_ray.llm.model import Models
from graphrag_ray.llm.ratelimit import RayRateLimiter
from graphrag_ray.query.index_data import IndexData
from graphrag_ray.storage.location import as_location, resolve
from graphrag_ray.storage.tables import write_table


@dataclass
class EvalResult:
    out: Path
    questions: pl.DataFrame
    answers: pl.DataFrame
    win_rates: pl.DataFrame
    gold: pl.DataFrame
    report: Path


def run_eval(root: str | Path = ".", config_file: str | Path | None = None, questions_file: str | Path | None = None,
             generate: int | None = None, methods: list[str] | None = None, judge: bool = True,
             out: str | Path | None = None, data: str | Path | None = None, progress=None) -> EvalResult:
    from graphrag_ray.ray_runtime import ensure_ray

    root = Path(root).resolve()
    settings = load_settings(root, config_file)
    methods = methods or ["local", "global"]
    unknown = [m for m in methods if m not in EVAL_METHODS]
    if unknown:
        raise GraphRagRayError(f"--methods: unknown {', '.join(unknown)} (have: {', '.join(EVAL_METHODS)})")
    data_dir = as_location(data) if data else resolve(root, settings.output.base_dir)
    index = IndexData.load(data_dir)
    if questions_file:
        questions = load_questions(questions_file)
    elif generate:
        questions = generate_questions(index, generate)
    else:
        raise GraphRagRayError("give --questions FILE or --generate N")
    if questions.height == 0:
        raise GraphRagRayError("no questions to evaluate")
    out = Path(out) if out else root / "eval" / hashlib.sha256(
        "\n".join(sorted(questions["question_id"].to_list())).encode()).hexdigest()[:12]
    out.mkdir(parents=True, exist_ok=True)
    write_table(questions, out, "questions", typed=False)
    ensure_ray()
    limiter = RayRateLimiter.for_job(f"eval-{out.name}")
    answers = answer_all(settings, root, data_dir, questions, methods, out, limiter,
                         settings.workers.num_actors, progress=progress)
    write_table(answers, out, "answers", typed=False)
    rates = win_rates(pl.DataFrame())
    if judge and len(methods) >= 2:
        models = Models.create(settings, root, limiter=limiter)
        if not models.has_chat(settings.global_search.chat_model_id):
            raise GraphRagRayError("judging needs a chat model with an API key (or pass --no-judge)")
        judgments = run_async(judge_all(models, settings, root, questions, answers, methods, out))
        write_table(judgments, out, "judgments", typed=False)
        rates = win_rates(judgments)
        write_table(rates, out, "win_rates", typed=False)
    gold = gold_metrics(questions, answers)
    write_table(gold, out, "gold_metrics", typed=False)
    report = write_report(out, questions, answers, gold, rates)
    return EvalResult(out, questions, answers, rates, gold, report)
