"""`graphrag-ray eval` / jobs/eval.py: questions -> answers -> judgments -> report, all resumable."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from graphrag_ray.config.load import load_settings
from graphrag_ray.errors import GraphRagRayError
from graphrag_ray.eval.judge import win_rates
from graphrag_ray.eval.metrics import gold_metrics
from graphrag_ray.eval.questions import generate_questions, load_questions
from graphrag_ray.eval.report import write_report
from graphrag_ray.eval.runner import JUDGMENT_SCHEMA, AnswerQuestions, JudgeAnswers
from graphrag_ray.exec.executor import Executor
from graphrag_ray.exec.progress import progress_bar
from graphrag_ray.exec.run_state import RunState
from graphrag_ray.exec.runtime import choose_backend, job_limiter
from graphrag_ray.exec.step import StepContext
from graphrag_ray.llm.models import Models
from graphrag_ray.llm.preflight import check_endpoints
from graphrag_ray.query.index_data import IndexData
from graphrag_ray.query.methods import eval_methods
from graphrag_ray.storage.location import as_location, resolve
from graphrag_ray.storage.tables import current_index, write_table


@dataclass
class EvalResult:
    out: Path
    questions: pl.DataFrame
    answers: pl.DataFrame
    win_rates: pl.DataFrame
    gold: pl.DataFrame
    report: Path


def run_eval(
    root: str | Path = ".",
    config_file: str | Path | None = None,
    questions_file: str | Path | None = None,
    generate: int | None = None,
    methods: list[str] | None = None,
    judge: bool = True,
    out: str | Path | None = None,
    data: str | Path | None = None,
    show_progress: bool = False,
) -> EvalResult:
    root = Path(root).resolve()
    settings = load_settings(root, config_file)
    methods = methods or ["local", "global"]
    unknown = [m for m in methods if m not in eval_methods()]
    if unknown:
        raise GraphRagRayError(f"--methods: unknown {', '.join(unknown)} (have: {', '.join(eval_methods())})")
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
    out = (
        Path(out)
        if out
        else root
        / "eval"
        / hashlib.sha256("\n".join(sorted(questions["question_id"].to_list())).encode()).hexdigest()[:12]
    )
    out.mkdir(parents=True, exist_ok=True)
    write_table(questions, out, "questions", typed=False)
    steps = [AnswerQuestions(current_index(data_dir).location, methods)]
    if judge and len(methods) >= 2:
        if not Models.create(settings, root).has_chat(settings.global_search.chat_model_id):
            raise GraphRagRayError("judging needs a chat model with an API key (or pass --no-judge)")
        steps.append(JudgeAnswers(methods))
    check_endpoints(settings, [m for step in steps for m in step.model_ids(settings)])
    backend = choose_backend(settings.workers.executor)
    limiter = job_limiter(backend, f"eval-{out.name}")
    with progress_bar(show_progress) as progress:
        executor = Executor(StepContext(settings, root), RunState(out / "run"), limiter, progress, backend)
        tables = executor.run_steps(steps, given={"questions": questions})
    answers = tables["answers"]
    write_table(answers, out, "answers", typed=False)
    judgments = tables.get("judgments", pl.DataFrame(schema=JUDGMENT_SCHEMA))
    rates = win_rates(judgments)
    if "judgments" in tables:
        write_table(judgments, out, "judgments", typed=False)
        write_table(rates, out, "win_rates", typed=False)
    gold = gold_metrics(questions, answers)
    write_table(gold, out, "gold_metrics", typed=False)
    report = write_report(out, questions, answers, gold, rates)
    return EvalResult(out, questions, answers, rates, gold, report)
