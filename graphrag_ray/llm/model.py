"""ChatModel / EmbeddingModel: the layers composed, outermost first.

    ledger   records every outcome (calls, tokens, cost, cache hits, retries, 429s, failures) per stage
    cache    a hit returns at once and costs nothing
    retry    tenacity around each attempt (fatal errors pass straight through)
    limiter  each attempt reserves prompt + max_tokens, reconciled with the real usage; a 429 pauses all
    client   the HTTP call
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from graphrag_ray.config.settings import ModelConfig, Settings
from graphrag_ray.errors import LLMUnavailableError
from graphrag_ray.llm.cache import ResponseCache, cache_key, open_cache, pack_vectors, unpack_vectors
from graphrag_ray.llm.client import (Completion, MalformedResponseError, OpenAIClient, RateLimitedError,
                                     TransientLLMError)
from graphrag_ray.llm.ledger import UsageLedger, active_ledger
from graphrag_ray.llm.ratelimit import LocalRateLimiter
from graphrag_ray.llm.retry import retrying
from graphrag_ray.llm.tokens import tokenizer_for
from graphrag_ray.storage.location import resolve

DEFAULT_429_PAUSE = 1.0  # seconds, when a 429 carries no Retry-After


@dataclass
class ChatResult:
    content: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False


class _ModelBase:
    def __init__(self, model_id: str, config: ModelConfig, *, cache: ResponseCache, limiter: Any,
                 ledger: UsageLedger):
        self.model_id = model_id
        self.config = config
        self.cache = cache
        self.limiter = limiter
        self.ledger = ledger
        self._clients: dict[int, OpenAIClient] = {}
        self._semaphores: dict[int, asyncio.Semaphore] = {}

    @property
    def tokenizer(self):
        """Loaded on first use (0.1-0.2 s per encoding): a short embedding input never needs one."""
        return tokenizer_for(self.config.model, self.config.encoding)

    @property
    def usage(self) -> UsageLedger:
        return active_ledger(self.ledger)

    @property
    def client(self) -> OpenAIClient:
        """One SDK client per event loop (its connections belong to that loop); created lazily: it is not
        picklable and not needed at all on a full cache hit."""
        try:
            loop_id = id(asyncio.get_running_loop())
        except RuntimeError:
            loop_id = 0
        if loop_id not in self._clients or self._clients[loop_id].closed:
            self._clients[loop_id] = OpenAIClient(self.model_id, self.config)
        return self._clients[loop_id]

    @property
    def _slots(self) -> asyncio.Semaphore:
        loop_id = id(asyncio.get_running_loop())
        if loop_id not in self._semaphores:
            self._semaphores[loop_id] = asyncio.Semaphore(self.config.concurrency)
        return self._semaphores[loop_id]

    def _limits(self) -> tuple[str, int | None, int | None]:
        rl = self.config.rate_limit
        return self.model_id, rl.rpm, rl.tpm

    @property
    def _limited_model(self) -> bool:
        return bool(self.config.rate_limit.rpm or self.config.rate_limit.tpm)

    def _reconcile(self, key: str, reserved: int, used: int) -> None:
        if self._limited_model:  # with no limits there is nothing to give back: no call to the limiter at all
            self.limiter.reconcile(key, reserved, used)

    async def _limited(self, reserve: int, stage: str, call):
        """One attempt under the concurrency slots and the job-wide limiter."""
        key, rpm, tpm = self._limits()
        async with self._slots:
            await self.limiter.acquire(key, reserve, rpm, tpm)
            try:
                result, used = await call()
            except RateLimitedError as exc:
                self.usage.record(stage, self.config.model, rate_limited=1)
                self._reconcile(key, reserve, 0)
                self.limiter.pause(key, exc.retry_after if exc.retry_after is not None else DEFAULT_429_PAUSE,
                                   rpm, tpm)
                raise
            except TransientLLMError as exc:
                if not isinstance(exc, MalformedResponseError):
                    self._reconcile(key, reserve, 0)
                raise
            self._reconcile(key, reserve, used)
            return result

    def _retrying(self, stage: str):
        return retrying(self.config.retry, lambda exc: self.usage.record(stage, self.config.model, retries=1))

    def _fail(self, stage: str, exc: Exception) -> LLMUnavailableError:
        self.usage.record(stage, self.config.model, failures=1)
        return LLMUnavailableError(f"{self.client.where}: gave up after {self.config.retry.max_attempts} attempts "
                                   f"({exc})")

    def _record(self, stage: str, prompt_tokens: int, completion_tokens: int) -> None:
        p = self.config.price
        self.usage.record_call(stage, self.config.model, prompt_tokens, completion_tokens,
                                p.input_per_1m, p.output_per_1m)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_clients"], state["_semaphores"] = {}, {}
        return state


class ChatModel(_ModelBase):
    def _params(self, json_mode: bool, response_format: dict | None, max_tokens: int | None,
                temperature: float | None, extra: dict[str, Any]) -> dict[str, Any]:
        params: dict[str, Any] = {"max_tokens": max_tokens or self.config.max_tokens,
                                  "temperature": self.config.temperature if temperature is None else temperature}
        if response_format is not None:
            params["response_format"] = response_format
        elif json_mode:
            params["response_format"] = {"type": "json_object"}
        params.update(extra)
        return params

    def count(self, messages: list[dict]) -> int:
        return self.tokenizer.count_messages(messages)

    def _reservation(self, messages: list[dict], max_tokens: int) -> int:
        """Tokens to reserve against the TPM limit (not counted at all when there is no TPM limit)."""
        return self.count(messages) + max_tokens if self.config.rate_limit.tpm else 0

    async def chat(self, messages: list[dict], *, stage: str, json_mode: bool = False,
                   response_format: dict | None = None, max_tokens: int | None = None,
                   temperature: float | None = None, use_cache: bool = True,
                   validate: Callable[[str], bool] | None = None, **extra: Any) -> ChatResult:
        """One completion. `validate(content) -> False` marks an answer unusable (e.g. truncated): it is
        retried like a transient error and never cached."""
        params = self._params(json_mode, response_format, max_tokens, temperature, extra)
        key = cache_key("chat", self.config.model, {"messages": messages, "params": params})
        if use_cache and (hit := self.cache.get(key)) is not None:
            self.usage.record(stage, self.config.model, cache_hits=1)
            return ChatResult(hit["content"], hit.get("prompt_tokens", 0), hit.get("completion_tokens", 0), True)
        wants_json = "response_format" in params
        reserve = self._reservation(messages, params["max_tokens"])

        async def call():
            completion: Completion = await self.client.chat(messages, params)
            if wants_json:
                try:
                    json.loads(completion.content)
                except ValueError:
                    raise MalformedResponseError(f"{self.client.where} returned invalid JSON") from None
            if validate is not None and not validate(completion.content):
                raise MalformedResponseError(f"{self.client.where} returned an incomplete answer")
            return completion, completion.prompt_tokens + completion.completion_tokens

        try:
            async for attempt in self._retrying(stage):
                with attempt:
                    completion = await self._limited(reserve, stage, call)
        except TransientLLMError as exc:
            raise self._fail(stage, exc) from None
        self._record(stage, completion.prompt_tokens, completion.completion_tokens)
        self.cache.put(key, {"content": completion.content, "prompt_tokens": completion.prompt_tokens,
                             "completion_tokens": completion.completion_tokens})
        return ChatResult(completion.content, completion.prompt_tokens, completion.completion_tokens)

    async def stream(self, messages: list[dict], *, stage: str, max_tokens: int | None = None,
                     temperature: float | None = None, use_cache: bool = True,
                     result: ChatResult | None = None, **extra: Any) -> AsyncIterator[str]:
        """Yield the answer as it arrives. `result`, if given, is filled in at the end (tokens, cached)."""
        result = result if result is not None else ChatResult("")
        params = self._params(False, None, max_tokens, temperature, extra)
        key = cache_key("chat", self.config.model, {"messages": messages, "params": params})
        if use_cache and (hit := self.cache.get(key)) is not None:
            self.usage.record(stage, self.config.model, cache_hits=1)
            result.content, result.cached = hit["content"], True
            for piece in _pieces(hit["content"]):
                yield piece
            return
        reserve = self._reservation(messages, params["max_tokens"])
        key_, rpm, tpm = self._limits()
        parts: list[str] = []
        usage: dict[str, int] = {}
        try:
            async for attempt in self._retrying(stage):
                with attempt:
                    async with self._slots:
                        await self.limiter.acquire(key_, reserve, rpm, tpm)
                        try:
                            async for delta in self.client.chat_stream(messages, params, usage):
                                parts.append(delta)
                                yield delta
                        except RateLimitedError as exc:
                            self.usage.record(stage, self.config.model, rate_limited=1)
                            self.limiter.pause(key_, exc.retry_after or DEFAULT_429_PAUSE, rpm, tpm)
                            raise
                        except TransientLLMError as exc:
                            if parts:  # text already shown: a retry would repeat it
                                raise LLMUnavailableError(f"stream from {self.client.where} broke: {exc}") from None
                            raise
        except TransientLLMError as exc:
            raise self._fail(stage, exc) from None
        content = "".join(parts)
        prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
        self._reconcile(key_, reserve, prompt + completion)
        self._record(stage, prompt, completion)
        self.cache.put(key, {"content": content, "prompt_tokens": prompt, "completion_tokens": completion})
        result.content, result.prompt_tokens, result.completion_tokens = content, prompt, completion


def _pieces(text: str, size: int = 24) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


class EmbeddingModel(_ModelBase):
    def batches(self, texts: list[str], counts: list[int] | None = None) -> list[list[int]]:
        """Indices of `texts` grouped by batch_size and batch_max_tokens."""
        counts = counts if counts is not None else self.counts(texts)
        out, current, tokens = [], [], 0
        for i, n in enumerate(counts):
            if current and (len(current) >= self.config.batch_size or tokens + n > self.config.batch_max_tokens):
                out.append(current)
                current, tokens = [], 0
            current.append(i)
            tokens += n
        if current:
            out.append(current)
        return out

    def counts(self, texts: list[str]) -> list[int]:
        """Token counts for batching, truncation and the TPM reservation - counted once per text. With no TPM
        limit, UTF-8 byte lengths stand in when they already put every text in one batch untruncated (a token
        is at least one byte, so the batching is the same) - a query's embedding then loads no tokenizer."""
        sizes = [len(text.encode("utf-8")) for text in texts]
        if (not self.config.rate_limit.tpm and len(texts) <= self.config.batch_size
                and sum(sizes) <= self.config.batch_max_tokens):
            return sizes
        count = self.tokenizer.count
        return [count(text) for text in texts]

    async def embed(self, texts: list[str], *, stage: str) -> list[list[float]]:
        vectors: list[list[float] | None] = [None] * len(texts)
        counts = self.counts(texts)
        await asyncio.gather(*(self._embed_batch(texts, counts, idx, vectors, stage)
                               for idx in self.batches(texts, counts)))
        return vectors  # type: ignore[return-value]

    async def _embed_batch(self, texts, counts, idx, vectors, stage) -> None:
        limit = self.config.batch_max_tokens
        batch = [texts[i] if counts[i] <= limit else _truncate(self.tokenizer, texts[i], limit) for i in idx]
        key = cache_key("embedding", self.config.model, {"input": batch, "dimensions": self.config.dimensions})
        hit = self.cache.get(key)
        if hit is not None:
            self.usage.record(stage, self.config.model, cache_hits=1)
            result = unpack_vectors(hit)
        else:
            reserve = sum(min(counts[i], limit) for i in idx) if self.config.rate_limit.tpm else 0

            async def call():
                vecs, used = await self.client.embed(batch)
                return (vecs, used), used

            try:
                async for attempt in self._retrying(stage):
                    with attempt:
                        result, used = await self._limited(reserve, stage, call)
            except TransientLLMError as exc:
                raise self._fail(stage, exc) from None
            self._record(stage, used, 0)
            self.cache.put(key, pack_vectors(result))
        for i, vec in zip(idx, result):
            vectors[i] = vec


class LocalEmbeddingModel:
    """`type: local_embedding`: hashed character n-gram vectors computed here - no endpoint, key or download."""

    def __init__(self, model_id: str, config: ModelConfig, **_):
        self.model_id = model_id
        self.config = config

    def batches(self, texts: list[str]) -> list[list[int]]:
        return [list(range(len(texts)))] if texts else []

    async def embed(self, texts: list[str], *, stage: str) -> list[list[float]]:
        from graphrag_ray.llm.local_embedding import ngram_vector

        return [ngram_vector(text, self.config.dimensions or 256) for text in texts]


def _truncate(tokenizer, text: str, max_tokens: int) -> str:
    tokens = tokenizer.encode(text)
    return text if len(tokens) <= max_tokens else tokenizer.decode(tokens[:max_tokens])


@dataclass
class Models:
    """The models of one command, sharing one cache, one limiter and one ledger."""

    settings: Settings
    cache: ResponseCache
    limiter: Any
    ledger: UsageLedger = field(default_factory=UsageLedger)
    _built: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def create(cls, settings: Settings, root: str | Path, limiter: Any = None,
               ledger: UsageLedger | None = None) -> "Models":
        cache_dir = resolve(root, settings.cache.base_dir) if settings.cache.enabled else None
        return cls(settings, open_cache(cache_dir), limiter or LocalRateLimiter(), ledger or UsageLedger())

    def chat(self, model_id: str) -> ChatModel:
        return self._get(model_id, ChatModel)

    def embedding(self, model_id: str) -> "EmbeddingModel | LocalEmbeddingModel":
        local = self.settings.model(model_id).type == "local_embedding"
        return self._get(model_id, LocalEmbeddingModel if local else EmbeddingModel)

    def has_chat(self, model_id: str) -> bool:
        """A chat model is configured: its entry exists and has an API key (an empty ${VAR} means none)."""
        if model_id not in self.settings.models:
            return False
        key = self.settings.models[model_id].api_key
        return bool(key and key.get_secret_value())

    def _get(self, model_id: str, kind):
        if model_id not in self._built:
            self._built[model_id] = kind(model_id, self.settings.model(model_id), cache=self.cache,
                                         limiter=self.limiter, ledger=self.ledger)
        return self._built[model_id]
