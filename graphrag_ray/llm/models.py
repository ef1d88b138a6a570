"""The models of one command: each model entry built once, all sharing one cache, one limiter and one ledger."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphrag_ray.config.settings import Settings
from graphrag_ray.llm.cache import ResponseCache, open_cache
from graphrag_ray.llm.embedding import EmbeddingModel, LocalEmbeddingModel
from graphrag_ray.llm.ledger import PaidJournal, UsageLedger
from graphrag_ray.llm.model import ChatModel
from graphrag_ray.llm.ratelimit import LocalRateLimiter
from graphrag_ray.storage.location import resolve_if_rooted


@dataclass
class Models:
    """The models of one command, sharing one cache, one limiter and one ledger."""

    settings: Settings
    cache: ResponseCache
    limiter: Any
    ledger: UsageLedger = field(default_factory=UsageLedger)
    cautious_start: bool = False  # batch jobs' workers: a model's first call goes alone (AdaptiveConcurrency)
    check_first: bool = False  # queries: each endpoint is checked alongside its first request
    retry_unusable: bool = False  # `index --retry-failures` (ChatModel.chat)
    session: str = field(default_factory=lambda: uuid.uuid4().hex)  # whose unusable answers are whose (cache)
    journal: PaidJournal | None = None  # a batch job's workers: what they pay, on disk as it is paid
    _built: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def create(
        cls,
        settings: Settings,
        root: str | Path | None,
        limiter: Any = None,
        ledger: UsageLedger | None = None,
        cautious_start: bool = False,
        check_first: bool = False,
        retry_unusable: bool = False,
        journal: PaidJournal | None = None,
    ) -> Models:
        # no project root (the API given dataframes): a relative cache folder has no home, and is not used
        cache_dir = resolve_if_rooted(root, settings.cache.base_dir) if settings.cache.enabled else None
        return cls(
            settings,
            open_cache(cache_dir),
            limiter or LocalRateLimiter(),
            ledger or UsageLedger(),
            cautious_start,
            check_first,
            retry_unusable,
            journal=journal,
        )

    async def aclose(self) -> None:
        """Close the SDK clients its models opened on the running loop: whoever made this Models closes it on
        each loop it used, before that loop ends (an HTTP session left open prints "Unclosed client session")."""
        for model in list(self._built.values()):
            await model.aclose()

    def run(self, coro):
        """asyncio.run(coro), this Models' clients on that loop closed before it ends, even when it fails."""

        async def main():
            try:
                return await coro
            finally:
                await self.aclose()

        return asyncio.run(main())

    def chat(self, model_id: str) -> ChatModel:
        return self._get(model_id, ChatModel)

    def embedding(self, model_id: str) -> EmbeddingModel | LocalEmbeddingModel:
        local = self.settings.model(model_id).type == "local_embedding"
        return self._get(model_id, LocalEmbeddingModel if local else EmbeddingModel)

    def usable(self, model_id: str) -> bool:
        """A model is configured: its entry exists and is computed here or has an API key (an empty ${VAR} means
        none)."""
        if model_id not in self.settings.models:
            return False
        entry = self.settings.models[model_id]
        return entry.type == "local_embedding" or bool(entry.api_key and entry.api_key.get_secret_value())

    def has_chat(self, model_id: str) -> bool:
        return self.usable(model_id)

    def _get(self, model_id: str, kind):
        if model_id not in self._built:
            self._built[model_id] = kind(
                model_id,
                self.settings.model(model_id),
                cache=self.cache,
                limiter=self.limiter,
                ledger=self.ledger,
                cautious_start=self.cautious_start,
                check_first=self.check_first,
                retry_unusable=self.retry_unusable,
                session=self.session,
                journal=self.journal,
            )
        return self._built[model_id]
