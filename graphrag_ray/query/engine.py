"""What every query method shares: the index, the models, prompts, and search / stream_search / context-only
built on one `prepare` step, so a streamed answer and a plain one are the same call."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from graphrag_ray.config.prompts import load_prompt
from graphrag_ray.config.settings import Settings
from graphrag_ray.llm.model import ChatResult
from graphrag_ray.llm.models import Models
from graphrag_ray.query.context.history import ConversationHistory
from graphrag_ray.query.extractive import extractive_answer
from graphrag_ray.query.index_data import IndexData
from graphrag_ray.query.result import Accounting, SearchResult


@dataclass
class Prepared:
    """The final call to make (or the answer already known), and the result it belongs to."""

    result: SearchResult
    messages: list[dict] = field(default_factory=list)
    model_id: str = "default_chat"
    max_tokens: int | None = None
    answer: str | None = None  # set when no final call is needed (e.g. no data)
    json_mode: bool = False


class QueryEngine(ABC):
    method = ""

    chat_model_key = "local_search"  # the settings section whose chat_model_id this method answers with
    lookups: tuple[str, ...] = ()  # IndexData lookups (cached properties) its queries use
    # the index's name when one question asks several (query/multi.py): its ids are cited as "<label>:<id>",
    # since every index numbers its reports and entities from 0
    label = ""

    def __init__(
        self,
        data: IndexData,
        models: Models,
        settings: Settings | None = None,
        root: Path | None = None,
        response_type: str | None = None,
        community_level: int | None = None,
        no_llm: bool = False,
    ):
        self.data = data
        self.models = models
        self.settings = settings or models.settings
        self.root = Path(root) if root else None
        self.response_type = response_type or self.settings.query.response_type
        self.community_level = self.settings.query.community_level if community_level is None else community_level
        self.last_result: SearchResult | None = None
        section = getattr(self.settings, self.chat_model_key)
        chat_id = section.chat_model_id
        # no chat model configured (no key) or --no-llm: answer from the evidence, with no LLM call
        self.no_llm = no_llm or not models.has_chat(chat_id)
        # the models, and the chat tokenizer every context budget needs, are set up with the
        # engine, not inside a query; an embedding tokenizer loads only for an input too long to skip counting
        if chat_id in self.settings.models:
            _ = self.models.chat(chat_id).tokenizer  # loaded now, not in the first question
        if getattr(section, "embedding_model_id", None) in self.settings.models:
            self.models.embedding(section.embedding_model_id)
        for name in self.lookups:  # the index's row lookups this method reads, built with it as well
            getattr(self.data, name)

    def cite(self, human_readable_id) -> str | int:
        return f"{self.label}:{human_readable_id}" if self.label else human_readable_id

    def prompt(self, relative_path: str) -> str:
        return load_prompt(self.root, relative_path)

    def chat(self, model_id: str):
        return self.models.chat(model_id)

    async def embed(self, model_id: str, texts: list[str]) -> list[list[float]]:
        return await self.models.embedding(model_id).embed(texts, stage=f"query_{self.method}")

    @property
    def stage(self) -> str:
        return f"query_{self.method}"

    @abstractmethod
    async def prepare(self, query: str, history: ConversationHistory | None) -> Prepared:
        """Build the context and the final call (or the answer already known)."""

    async def extractive(self, query: str, history: ConversationHistory | None = None) -> SearchResult:
        result = await self.context_only(query, history)
        result.response, used = extractive_answer(query, result.context_text, gist=self.method == "global")
        result.details.update(extractive=True, evidence=used)
        return result

    async def search(self, query: str, conversation_history: ConversationHistory | None = None) -> SearchResult:
        if self.no_llm:
            self.last_result = await self.extractive(query, conversation_history)
            return self.last_result
        with Accounting() as acc:
            prepared = await self.prepare(query, conversation_history)
            if prepared.answer is not None:
                prepared.result.response = prepared.answer
            else:
                answer = await self.chat(prepared.model_id).chat(
                    prepared.messages, stage=self.stage, max_tokens=prepared.max_tokens, json_mode=prepared.json_mode
                )
                prepared.result.response = answer.content
        self.last_result = acc.fill(prepared.result)
        return self.last_result

    async def stream_search(
        self, query: str, conversation_history: ConversationHistory | None = None
    ) -> AsyncIterator[str]:
        """Yield the answer as it arrives; `last_result` holds the full result afterwards."""
        if self.no_llm:
            result = await self.extractive(query, conversation_history)
            for i in range(0, len(result.response), 24):
                yield result.response[i : i + 24]
            self.last_result = result
            return
        with Accounting() as acc:
            prepared = await self.prepare(query, conversation_history)
            if prepared.answer is not None:
                prepared.result.response = prepared.answer
                yield prepared.answer
            else:
                final = ChatResult("")
                pieces = self.chat(prepared.model_id).stream(
                    prepared.messages, stage=self.stage, max_tokens=prepared.max_tokens, result=final
                )
                async with contextlib.aclosing(pieces):  # a reader that leaves early closes the answer's stream
                    async for piece in pieces:
                        yield piece
                prepared.result.response = final.content
        self.last_result = acc.fill(prepared.result)

    async def context_only(self, query: str, conversation_history: ConversationHistory | None = None) -> SearchResult:
        """The context that would be sent; no answer call. (Global search still makes its map calls, and DRIFT its
        primer, because their final context is made of LLM answers.)"""
        with Accounting() as acc:
            prepared = await self.prepare(query, conversation_history)
        prepared.result.response = ""
        return acc.fill(prepared.result)


def system_and_user(system: str, query: str) -> list[dict]:
    return [{"role": "system", "content": system}, {"role": "user", "content": query}]
