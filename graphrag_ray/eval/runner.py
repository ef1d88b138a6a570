"""Answer every (question, method) pair on a pool of async Ray actors sharing the job's rate limiter.

Results are written in small Parquet parts as they arrive (ROOT/<out>/answers/part-*.parquet), so a re-run
skips every pair already answered. `evidence` is the no-LLM baseline (local context, extractive answer)."""

from __future__ import annotations

import time
import uuid
from collections import deque
from pathlib import Path

import polars as pl
import ray

from graphrag_ray.config.settings import Settings
from graphrag_ray.errors import GraphRagRayError

ANSWER_SCHEMA = {"question_id": pl.String, "method": pl.String, "answer": pl.String,
                 "source_ids": pl.List(pl.String), "report_ids": pl.List(pl.String), "latency_s": pl.Float64,
                 "llm_calls": pl.Int64, "prompt_tokens": pl.Int64, "output_tokens": pl.Int64, "cost": pl.Float64,
                 "error": pl.String}
EVAL_METHODS = ("local", "global", "drift", "basic", "hybrid", "evidence")
FLUSH_EVERY = 16


class EvalWorker:
    """Holds the index and the models once; answers many pairs concurrently."""

    def __init__(self, settings: Settings, root: str, data_dir: str, limiter):
        from graphrag_ray.llm.model import Models
        from graphrag_ray.query.index_data import IndexData

        self.settings, self.root = settings, Path(root)
        self.data = IndexData.load(data_dir)
        self.models = Models.create(settings, root, limiter=limiter)

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()

    async def answer(self, question_id: str, question: str, method: str) -> dict:
        from graphrag_ray.query.factory import make_engine

        level = min(self.settings.query.community_level, self.data.max_level)
        started = time.perf_counter()
        try:
            engine = make_engine("local" if method == "evidence" else method, self.data, self.models, self.settings,
                                 self.root, community_level=level, no_llm=method == "evidence")
            result = await engine.search(question)
        except GraphRagRayError as exc:
            return {"question_id": question_id, "method": method, "answer": "", "source_ids": [], "report_ids": [],
                    "latency_s": time.perf_counter() - started, "llm_calls": 0, "prompt_tokens": 0,
                    "output_tokens": 0, "cost": 0.0, "error": str(exc)}
        ctx = result.context_data
        sources = [str(r["id"]) for r in ctx.get("sources", [])]
        reports = [str(r["id"]) for r in ctx.get("reports", []) + ctx.get("global_reports", [])]
        return {"question_id": question_id, "method": method, "answer": result.response, "source_ids": sources,
                "report_ids": reports, "latency_s": result.completion_time, "llm_calls": result.llm_calls,
                "prompt_tokens": result.prompt_tokens, "output_tokens": result.output_tokens, "cost": result.cost,
                "error": None}


def read_parts(folder: Path, schema: dict) -> pl.DataFrame:
    parts = sorted(folder.glob("part-*.parquet")) if folder.exists() else []
    return pl.concat([pl.read_parquet(p) for p in parts], how="diagonal_relaxed") if parts \
        else pl.DataFrame(schema=schema)


def write_part(folder: Path, rows: list[dict], schema: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    name = f"part-{time.time_ns()}-{uuid.uuid4().hex[:6]}.parquet"
    tmp = folder / f".{name}.tmp"
    pl.DataFrame(rows, schema=schema).write_parquet(tmp)
    tmp.replace(folder / name)


def answer_all(settings: Settings, root: Path, data_dir: Path, questions: pl.DataFrame, methods: list[str],
               out: Path, limiter, num_actors: int, in_flight_per_actor: int = 8, progress=None) -> pl.DataFrame:
    folder = out / "answers"
    done = read_parts(folder, ANSWER_SCHEMA)
    seen = set(zip(done["question_id"].to_list(), done["method"].to_list()))
    todo = deque((q["question_id"], q["question"], m) for q in questions.iter_rows(named=True) for m in methods
                 if (q["question_id"], m) not in seen)
    if todo:
        actor = ray.remote(EvalWorker).options(num_cpus=0, max_concurrency=1000, max_restarts=-1,
                                               max_task_retries=-1, scheduling_strategy="SPREAD")
        workers = [actor.remote(settings, str(root), str(data_dir), limiter) for _ in range(num_actors)]
        load = [0] * len(workers)
        pending: dict = {}
        buffer: list[dict] = []
        task = progress.add_task("answers", total=len(todo), calls=0, tokens=0, cost=0.0) if progress else None
        while todo or pending:
            while todo and min(load) < in_flight_per_actor:
                w = load.index(min(load))
                pending[workers[w].answer.remote(*todo.popleft())] = w
                load[w] += 1
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                load[pending.pop(ref)] -= 1
                buffer.append(ray.get(ref))
                if progress:
                    progress.update(task, advance=1)
            if len(buffer) >= FLUSH_EVERY or (not todo and not pending and buffer):
                write_part(folder, buffer, ANSWER_SCHEMA)
                buffer = []
        for w in workers:
            ray.kill(w)
    return read_parts(folder, ANSWER_SCHEMA).unique(["question_id", "method"], keep="first").sort(
        "question_id", "method")
