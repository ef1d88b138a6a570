"""Question generation (Microsoft GraphRAG's LocalQuestionGen): candidate next questions from the local context
of the last user question."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from graphrag_ray.config.prompts import fill, load_prompt
from graphrag_ray.query.local import LocalSearch
from graphrag_ray.query.result import Accounting

_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)、]|\[\d+\])\s*")


@dataclass
class QuestionResult:
    response: list[str]
    context_data: str | dict[str, Any] = field(default_factory=dict)
    completion_time: float = 0.0
    llm_calls: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0


def clean_questions(text: str, limit: int) -> list[str]:
    out = []
    for line in text.splitlines():
        question = _BULLET.sub("", line).strip()
        if question:
            out.append(question)
    return out[:limit]


class LocalQuestionGen:
    def __init__(self, local_search: LocalSearch, model_params: dict | None = None):
        self.local = local_search
        self.model_params = model_params or {}

    async def agenerate(
        self, question_history: list[str], context_data: str | None = None, question_count: int = 3
    ) -> QuestionResult:
        started = time.perf_counter()
        if self.local.no_llm:
            return await self._from_entities(question_history, question_count, started)
        with Accounting() as acc:
            records: dict = {}
            if context_data is None:
                context = await self.local.build_context(question_history[-1] if question_history else "")
                context_data, records = context.text, context.records
            settings = self.local.settings
            system = fill(
                load_prompt(self.local.root, settings.query.question_gen_prompt),
                context_data=context_data,
                question_count=question_count,
            )
            user = "\n".join(f"- {q}" for q in question_history)
            answer = await self.local.chat(settings.local_search.chat_model_id).chat(
                [{"role": "system", "content": system}, {"role": "user", "content": user}],
                stage="question_gen",
                temperature=self.model_params.get("temperature"),
            )
        total = acc.ledger.total()
        return QuestionResult(
            clean_questions(answer.content, question_count),
            records or context_data,
            time.perf_counter() - started,
            total.calls + total.cache_hits,
            total.prompt_tokens,
            total.completion_tokens,
            total.cost,
        )

    async def _from_entities(self, history: list[str], count: int, started: float) -> QuestionResult:
        """No LLM: questions about the entities nearest the last question that it did not name."""
        context = await self.local.build_context(history[-1] if history else "")
        asked = " ".join(history)
        names = [e["title"] for e in context.selected if e["title"] not in asked]
        cjk = any("\u3400" <= ch <= "\u9fff" for ch in asked)
        questions = [(f"{name}和这件事有什么关系？" if cjk else f"How is {name} related to this?") for name in names]
        return QuestionResult(questions[:count], context.records, time.perf_counter() - started)

    generate = agenerate
