"""One index, loaded once per replica, answering questions: the body of an index's serve deployment.

The tables stay in memory between requests. Every `reload_check_s` a request looks at CURRENT; when it names a
new version, that request loads it (requests arriving meanwhile wait for the same load) and every request started
after the swap reads it, while answers already under way finish on the version they began with - an `update`
published under a running server is picked up without a restart and without a failed request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphrag_ray.config.load import load_settings
from graphrag_ray.config.settings import Settings
from graphrag_ray.llm.models import Models
from graphrag_ray.query.context.history import ConversationHistory
from graphrag_ray.query.context.local_context import LocalContext
from graphrag_ray.query.global_search import MapPoints
from graphrag_ray.query.index_data import IndexData
from graphrag_ray.query.methods import check_method
from graphrag_ray.query.multi import EnginePart, MultiIndexSearch, index_name
from graphrag_ray.query.result import SearchResult
from graphrag_ray.serve.front_ends import DIRECT
from graphrag_ray.serve.protocol import Busy
from graphrag_ray.storage.location import resolve
from graphrag_ray.storage.tables import current_index

log = logging.getLogger(__name__)
OPTIONS = ("response_type", "community_level", "dynamic_community_selection")  # request fields queries take


@dataclass
class Loaded:
    folder: str  # the version's folder (what CURRENT named when it was loaded)
    data: IndexData


def history_of(messages: list[dict]) -> tuple[str, ConversationHistory]:
    """The question (the last user message) and the conversation before it (user and assistant turns; system
    messages are the client's own instructions, not the conversation)."""
    turns = [m for m in messages if m.get("role") in ("user", "assistant")]
    if not turns or turns[-1]["role"] != "user":
        from graphrag_ray.errors import UsageError

        raise UsageError("messages: the last message must be the user's question")
    history = ConversationHistory()
    for turn in turns[:-1]:
        history.add_turn(turn["role"], content_text(turn.get("content")))
    return content_text(turns[-1].get("content")), history


def content_text(content: Any) -> str:
    """A message's text: a string, or OpenAI's list of parts (their text parts joined)."""
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content or "")


def result_payload(result: SearchResult) -> dict:
    """What a reply carries besides the answer: the context's ids per table (for citations), usage and details."""
    sources = {
        table: [r.get("id") for r in rows if isinstance(r, dict) and "id" in r]
        for table, rows in result.context_data.items()
        if table not in ("history", "points")
    }
    return {
        "response": result.response,
        "method": result.method,
        "sources": sources,
        "usage": {
            "llm_calls": result.llm_calls,
            "paid_calls": result.details.get("paid_calls", result.llm_calls),
            "prompt_tokens": result.prompt_tokens,
            "output_tokens": result.output_tokens,
            "cost": result.cost,
        },
        "latency_s": round(result.completion_time, 4),
        "details": {k: v for k, v in result.details.items() if isinstance(v, (str, int, float, bool, list))},
    }


class IndexService:
    """One index's tables, models and engines in this process."""

    def __init__(self, root: str, limiter: Any = None, reload_check_s: float | None = None):
        self.root = Path(root).resolve()
        self.settings: Settings = load_settings(self.root)
        # map calls run here, on this replica's event loop: a replica is already one of many Ray processes
        self.settings.global_search.executor = "local"
        for model in self.settings.models.values():
            if "concurrency" not in model.model_fields_set:
                # the default is an index worker's; a replica answers max_ongoing_requests questions at once, each
                # with calls in flight (jobs/bench_serve.py: 16 held one replica to ~6 questions/s at 1 s a call).
                # A concurrency set on purpose (a local server's) stands; rate limits hold in the limiter anyway
                model.concurrency = max(model.concurrency, 4 * self.settings.serve.max_ongoing_requests)
        self.name = index_name(self.root, self.settings)
        self.output = resolve(self.root, self.settings.output.base_dir)
        self.models = Models.create(self.settings, self.root, limiter=limiter, check_first=True)
        self.reload_check_s = self.settings.serve.reload_check_s if reload_check_s is None else reload_check_s
        self.loaded = self._load()
        self._checked = time.monotonic()
        self._reloading: asyncio.Task | None = None
        # the replica's own queue: max_ongoing_requests questions answered at once, max_queued_requests waiting
        # for a turn, a Busy beyond them (429). Ray Serve hands every question straight here (its own limit is
        # the sum): its router, finding replicas full, retries with backoff and left turns idle (bench_serve)
        self._turns = asyncio.Semaphore(self.settings.serve.max_ongoing_requests)
        self._waiting = 0

    # -- the tables ------------------------------------------------------------------------------------
    def _load(self) -> Loaded:
        folder = current_index(self.output)
        search = {"nprobes": self.settings.embed_text.nprobes, "refine_factor": self.settings.embed_text.refine_factor}
        data = IndexData.load(self.output, vector_search=search)
        for name in ("entity_matcher", "graph_walk", "report_by_community", "community_rows"):
            getattr(data, name)  # the lookups every method reads, built before the first question
        log.info("index %s: version %s loaded", self.name, folder)
        return Loaded(str(folder), data)

    async def fresh(self) -> Loaded:
        """The loaded version, after loading a newer one CURRENT names (looked at every reload_check_s)."""
        if time.monotonic() - self._checked >= self.reload_check_s:
            self._checked = time.monotonic()
            if str(current_index(self.output)) != self.loaded.folder and self._reloading is None:
                self._reloading = asyncio.ensure_future(asyncio.to_thread(self._load))
        if self._reloading is not None:
            task = self._reloading
            try:
                self.loaded = await asyncio.shield(task)
            finally:
                if self._reloading is task:
                    self._reloading = None
        return self.loaded

    async def info(self) -> dict:
        loaded = await self.fresh()
        return {
            "name": self.name,
            "version": Path(loaded.folder).name,
            "root": str(self.root),
            "entities": loaded.data.entities.height,
            "reports": loaded.data.community_reports.height,
            "chat_model": self.settings.models[self.settings.local_search.chat_model_id].model
            if self.settings.local_search.chat_model_id in self.settings.models
            else "",
        }

    # -- questions -------------------------------------------------------------------------------------
    async def engine(self, method: str, question: str, options: dict):
        from graphrag_ray.query.factory import engine_for

        method = check_method(question, method, options.get("community_level"), self.settings.query.max_question_chars)
        loaded = await self.fresh()
        return await engine_for(
            question,
            method,
            loaded.data,
            self.models,
            self.settings,
            self.root,
            options.get("community_level"),
            bool(options.get("dynamic_community_selection")),
            options.get("response_type"),
        )

    @contextlib.asynccontextmanager
    async def turn(self):
        """A turn to answer a question: at once, after the questions ahead in this replica's queue, or Busy."""
        cfg = self.settings.serve
        if self._turns.locked() and self._waiting >= cfg.max_queued_requests:
            raise Busy(cfg.retry_after_s)
        self._waiting += 1
        try:
            await self._turns.acquire()
        finally:
            self._waiting -= 1
        try:
            yield
        finally:
            self._turns.release()

    def deadline(self):
        """A question's model calls end within query.deadline_s of its turn (the queue before it is not the
        model's wait); the 502 names the endpoint."""
        from graphrag_ray.llm.deadline import question_deadline

        return question_deadline(self.settings.query.deadline_s, report=None)

    async def ask(self, method: str, messages: list[dict], options: dict, others: list | None = None) -> dict:
        """The answer and its payload. `others`: further indexes asked with this one (query/multi.py), as parts
        (other deployments' handles): this replica makes the answer."""
        async with self.turn(), self.deadline():
            return await self._ask(method, messages, options, others)

    async def _ask(self, method: str, messages: list[dict], options: dict, others: list | None) -> dict:
        engine, question, history, details = await self._question(method, messages, options, others)
        result = await engine.search(question, history)
        result.details.update(details)
        return result_payload(result)

    async def stream(
        self, method: str, messages: list[dict], options: dict, others: list | None = None
    ) -> AsyncIterator[dict]:
        """{"delta": text} pieces as the answer arrives, then {"done": payload}."""
        async with self.turn(), self.deadline():
            engine, question, history, details = await self._question(method, messages, options, others)
            async for piece in engine.stream_search(question, history):
                if piece:
                    yield {"delta": piece}
            engine.last_result.details.update(details)
            yield {"done": result_payload(engine.last_result)}

    async def context(self, method: str, messages: list[dict], options: dict, others: list | None = None) -> dict:
        """The context a method would answer from, as tables of records, and its text; no answer call."""
        async with self.turn(), self.deadline():
            engine, question, history, details = await self._question(method, messages, options, others)
            result = await engine.context_only(question, history)
        result.details.update(details)
        return {**result_payload(result), "context": result.context_data, "context_text": result.context_text}

    async def _question(self, method: str, messages: list[dict], options: dict, others: list | None):
        question, history = history_of(messages)
        if method == DIRECT:  # a front end's task, or /bypass: the chat model alone (serve/front_ends.py)
            from graphrag_ray.query.direct import DirectAnswer

            loaded = await self.fresh()
            return DirectAnswer(loaded.data, self.models, self.settings, self.root), question, history, {}
        if others:
            check_method(question, method, options.get("community_level"), self.settings.query.max_question_chars)
            mine = await self.part(options)
            answerer = mine.global_engine if method == "global" else mine.local_engine
            return MultiIndexSearch(method, [mine, *others], answerer), question, history, {}
        engine, details = await self.engine(method, question, options)
        return engine, question, history, details

    # -- one part of a question asked of several indexes -----------------------------------------------
    async def part(self, options: dict) -> EnginePart:
        from graphrag_ray.query.factory import make_engine

        loaded = await self.fresh()
        level = options.get("community_level")
        engines = [
            make_engine(
                m,
                loaded.data,
                self.models,
                self.settings,
                self.root,
                options.get("response_type"),
                min(self.settings.query.community_level if level is None else level, loaded.data.max_level),
                bool(options.get("dynamic_community_selection")),
            )
            for m in ("global", "local")
        ]
        return EnginePart(self.name, *engines)

    async def points(self, question: str, options: dict) -> MapPoints:
        return await (await self.part(options)).points(question)

    async def local_context(self, question: str, history: ConversationHistory | None, options: dict) -> LocalContext:
        return await (await self.part(options)).local_context(question, history)

    async def report_batches(self, question: str, options: dict) -> SearchResult:
        return await (await self.part(options)).report_batches(question)
