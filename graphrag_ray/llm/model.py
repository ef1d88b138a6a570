"""ChatModel: chat and streamed chat over the model call path (call_path.py: ledger, cache, retry, limiter, client),
with what makes an answer usable (cut off, not JSON, failing the caller's check) and the re-asks that follow."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from graphrag_ray.errors import LLMUnavailableError, UnusableAnswerError
from graphrag_ray.llm.batch_collect import active_collector
from graphrag_ray.llm.cache import cache_key
from graphrag_ray.llm.call_path import ModelBase
from graphrag_ray.llm.outcomes import Completion, TransientLLMError, completion_of
from graphrag_ray.llm.request_shape import is_reasoning_model
from graphrag_ray.parsing.llm_output import parse_json_object


@dataclass
class ChatResult:
    content: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False
    problem: str | None = None  # why the answer is not usable as a whole (e.g. "cut off at max_tokens")
    cut: bool = False  # the answer stopped at max_tokens (usable or not)

    @property
    def complete(self) -> bool:
        return self.problem is None


CUT_OFF = "cut off at max_tokens"
MAX_ANEW = 20  # re-asks of one request across runs, each cached under a key of its own
CUT_BEFORE_ANSWER = "cut off at max_tokens before any answer (the budget went to reasoning)"
REPAIR = (
    "Your previous answer could not be used: it was {problem} (it began: {sample}). Answer again, completely "
    "and exactly in the format the instructions ask for, with nothing before or after it."
)


class ChatModel(ModelBase):
    def _params(
        self,
        json_mode: bool,
        response_format: dict | None,
        max_tokens: int | None,
        temperature: float | None,
        extra: dict[str, Any],
    ) -> dict[str, Any]:
        """The request's logical parameters (the cache key is made of these; the client sends them in the shape the
        endpoint takes). A reasoning model's budget holds its reasoning too: never less than reasoning_max_tokens."""
        budget = max_tokens or self.config.max_tokens
        if is_reasoning_model(self.config):
            budget = max(budget, self.config.reasoning_max_tokens)
        params: dict[str, Any] = {"max_tokens": budget}
        temperature = self.config.temperature if temperature is None else temperature
        if temperature is not None:
            params["temperature"] = temperature
        if response_format is not None:
            params["response_format"] = response_format
        elif json_mode:
            params["response_format"] = {"type": "json_object"}
        params.update(extra)
        return params

    def _as_sent(self, params: dict[str, Any], stage: str) -> dict[str, Any]:
        """The parameters as sent: with OpenAI's `prompt_cache_key` (its routing hint, which keeps one stage's
        requests - one prompt template - on the machines caching its prefix) where the endpoint is OpenAI's. Not
        part of the cache key: a cached answer is the same answer."""
        if "api.openai.com" not in self.config.api_base or "prompt_cache_key" in params:
            return params
        return {**params, "prompt_cache_key": f"graphrag-ray-{stage}"}

    def count(self, messages: list[dict]) -> int:
        return self.tokenizer.count_messages(messages)

    def _reservation(self, messages: list[dict], max_tokens: int) -> tuple[int, int]:
        """(prompt tokens, the most the answer may hold) for the limiter, which reserves the prompt and the answer
        it expects from every answer the job has had (ModelWindow.reservation). Not counted at all while no TPM
        limit is configured or announced."""
        if not (self.config.rate_limit.tpm or self.limiter.knows_limits(self.model_id)):
            return 0, 0
        return self.count(messages), max_tokens

    async def chat(
        self,
        messages: list[dict],
        *,
        stage: str,
        json_mode: bool = False,
        response_format: dict | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        use_cache: bool = True,
        validate: Callable[[str], bool] | None = None,
        **extra: Any,
    ) -> ChatResult:
        """One completion. An answer that is not JSON where JSON was asked for, or that `validate(content)`
        rejects, is unusable: it is paid for once (recorded, and cached - a deterministic model would only repeat
        it) and asked again once, the request changed by a repair instruction (never by a temperature: reasoning
        models refuse any but their default). An answer cut at max_tokens before any of it was written (the budget
        went to reasoning), or before anything `validate` accepts (no complete record), is asked again once with
        twice the budget; an answer cut after usable records is usable (the caller keeps its complete records). A
        second unusable answer raises UnusableAnswerError, naming the problem and how the answer began. With
        `retry_unusable` (a retry of the failed items), a re-ask whose unusable answer came from the cache is sent
        again."""
        params = self._params(json_mode, response_format, max_tokens, temperature, extra)

        def ask(msgs: list[dict], settings: dict):
            return self._chat_once(msgs, settings, stage, use_cache, validate)

        first = await ask(messages, params)
        if first.complete:
            return first
        if first.problem in (CUT_BEFORE_ANSWER, CUT_OFF):  # nothing usable within the budget: a larger one
            repaired, changed = messages, {**params, "max_tokens": 2 * params["max_tokens"]}
        else:
            sample = json.dumps(_sample(first.content), ensure_ascii=False)
            repaired = messages + [{"role": "user", "content": REPAIR.format(problem=first.problem, sample=sample)}]
            changed = params
        second = await ask(repaired, changed)
        if second.complete:
            return second
        self.usage.record(stage, self.config.model, failures=1)
        raise UnusableAnswerError(
            f"{self.client.where}: the answer was unusable twice ({second.problem}) | "
            f"answer began: {json.dumps(_sample(second.content), ensure_ascii=False)}"
        )

    @staticmethod
    def _problem(content: str, cut: bool, wants_json: bool, validate: Callable[[str], bool] | None) -> str | None:
        """Why an answer cannot be used as it is, or None."""
        if cut and not content.strip():
            return CUT_BEFORE_ANSWER  # never an empty success
        if wants_json and parse_json_object(content) is None:
            return "not valid JSON"
        if validate is not None and not validate(content):
            return CUT_OFF if cut else "not in the format asked for"
        return None

    async def _chat_once(
        self, messages: list[dict], params: dict, stage: str, use_cache: bool, validate: Callable[[str], bool] | None
    ) -> ChatResult:
        """One request. A cached answer is judged again (the parser may have learned since); an unusable one is
        served only to the command that paid for it (so it does not pay twice) - any later run, query or retry asks
        again, under a key of its own (`anew`), so no cached record is ever overwritten."""
        wants_json = "response_format" in params
        for anew in range(MAX_ANEW):
            key = cache_key(
                "chat", self.config.model, {"messages": messages, "params": params, **({"anew": anew} if anew else {})}
            )
            hit = self.cache.get(key) if use_cache else None
            if (
                hit is None
                or hit.get("session") == self.session
                or self._problem(hit["content"], bool(hit.get("cut")), wants_json, validate) is None
            ):
                break
        if hit is None and use_cache and (collector := active_collector()) is not None:
            # batch mode: the answer will come from a Batch API job (llm/batch_collect.py)
            collector.defer(self, key, stage, messages, self.client.batch_body(messages, self._as_sent(params, stage)))

        async def send() -> tuple[dict, int, int]:
            received: list[str] = []
            try:
                completion: Completion = await self.client.chat(messages, self._as_sent(params, stage), received)
            except asyncio.CancelledError:
                if received:  # stopped (Ctrl-C, a fatal error elsewhere) while its answer came: it was billed
                    prompt, completion_tokens = self.count(messages), self.tokenizer.count("".join(received))
                    self._record_paid(stage, _entry("", prompt, completion_tokens))
                    self.usage.record(stage, self.config.model, unusable=1, counted_here=1)
                raise
            entry = self._completion_entry(messages, completion)
            if problem := self._problem(completion.content, completion.finish_reason == "length", wants_json, validate):
                entry["unusable"], entry["session"] = problem, self.session
            return entry, entry["prompt_tokens"], entry["completion_tokens"]

        reserve = functools.partial(self._reservation, messages, params["max_tokens"])
        entry, cached = await self._call(stage, key, reserve, send, use_cache)
        problem = (
            self._problem(entry["content"], bool(entry.get("cut")), wants_json, validate)
            if cached
            else entry.get("unusable")
        )
        return ChatResult(
            entry["content"],
            entry.get("prompt_tokens", 0),
            entry.get("completion_tokens", 0),
            cached,
            problem,
            bool(entry.get("cut")),
        )

    def accept_batch_answer(self, key: str, stage: str, messages: list[dict], body: dict) -> None:
        """A Batch API answer to the request cached under `key`: through the same reading of the answer, ledger (at
        the batch price) and cache as a synchronous one. Marked as this command's, so an unusable one is repaired
        (asked again, changed) when its item runs again, not asked again unchanged. One already cached (a command
        killed while it read the results) is not recorded twice."""
        if self.cache.get(key) is not None:
            return
        completion = completion_of(body)
        entry = self._completion_entry(messages, completion)
        entry["session"] = self.session
        self._record_paid(stage, {**entry, "batch": True})
        self.usage.record(stage, self.config.model, counted_here=int(bool(entry.get("counted_here"))))
        self.cache.put(key, {**entry, "stage": stage})
        self.batch_answers.add(key)

    def _completion_entry(self, messages: list[dict], completion: Completion) -> dict:
        """The entry to cache for a whole answer (a response, or a Batch API output line); `cut` at max_tokens."""
        entry = self._paid_entry(
            messages,
            completion.content,
            completion.prompt_tokens,
            completion.completion_tokens,
            completion.reasoning,
            completion.reasoning_tokens,
            completion.cached_tokens,
        )
        if completion.finish_reason == "length":
            entry["cut"] = True
        return entry

    def _paid_entry(
        self,
        messages: list[dict],
        content: str,
        prompt_tokens: int,
        completion_tokens: int,
        reasoning: str = "",
        reasoning_tokens: int = 0,
        cached_tokens: int = 0,
    ) -> dict:
        """The entry to cache for a paid answer (its reasoning text is not kept: only its tokens). A server that
        reports no usage (llama.cpp's in streaming mode, some proxies) is counted with the tokenizer here, and the
        entry says so; reasoning a server sends but does not count is counted here too (it is billed as output)."""
        entry = _entry(content, prompt_tokens, completion_tokens)
        if not prompt_tokens and not completion_tokens:
            reasoning_tokens = self.tokenizer.count(reasoning) if reasoning else 0
            entry.update(
                prompt_tokens=self.count(messages),
                counted_here=True,
                completion_tokens=self.tokenizer.count(content) + reasoning_tokens,
            )
        elif reasoning and not reasoning_tokens:
            reasoning_tokens = self.tokenizer.count(reasoning)
        if reasoning_tokens:
            entry["reasoning_tokens"] = reasoning_tokens
        if cached_tokens:  # of the prompt, served from the provider's prompt cache (billed at its price)
            entry["cached_tokens"] = min(cached_tokens, entry["prompt_tokens"])
        return entry

    async def stream(
        self,
        messages: list[dict],
        *,
        stage: str,
        max_tokens: int | None = None,
        temperature: float | None = None,
        use_cache: bool = True,
        result: ChatResult | None = None,
        **extra: Any,
    ) -> AsyncIterator[str]:
        """Yield the answer as it arrives (a cached one in pieces). `result`, if given, is filled in at the end.
        The request goes through the same layers as `chat`, as a task whose deltas reach this generator through a
        queue; leaving the generator early cancels it."""
        result = result if result is not None else ChatResult("")
        params = self._params(False, None, max_tokens, temperature, extra)
        key = cache_key("chat", self.config.model, {"messages": messages, "params": params})
        deltas: asyncio.Queue = asyncio.Queue()

        async def send(budget: int = params["max_tokens"]) -> tuple[dict, int, int]:
            usage: dict[str, Any] = {}
            parts: list[str] = []
            try:
                async for delta in self.client.chat_stream(messages, {**params, "max_tokens": budget}, usage):
                    parts.append(delta)
                    deltas.put_nowait(delta)
                if (
                    not "".join(parts).strip()
                    and usage.get("finish_reason") == "length"
                    and budget == params["max_tokens"]
                ):
                    # the budget went to reasoning and nothing was shown: paid for, and asked once with twice it
                    entry = self._paid_entry(
                        messages,
                        "",
                        usage.get("prompt_tokens", 0),
                        usage.get("completion_tokens", 0),
                        usage.get("reasoning", ""),
                        usage.get("reasoning_tokens", 0),
                        usage.get("cached_tokens", 0),
                    )
                    self._record_paid(stage, entry)
                    self.usage.record(stage, self.config.model, unusable=1)
                    return await send(2 * budget)
            except TransientLLMError as exc:
                if parts:  # text already shown: a retry would repeat it. What was generated was paid for
                    prompt, completion = self.count(messages), self.tokenizer.count("".join(parts))
                    self._record_paid(stage, _entry("", prompt, completion))
                    self.usage.record(stage, self.config.model, unusable=1, counted_here=1)
                    raise LLMUnavailableError(
                        f"stream from {self.client.where} broke: {exc} (paid for: {prompt:,} "
                        f"prompt + {completion:,} completion tokens, counted here)"
                    ) from None
                raise
            entry = self._paid_entry(
                messages,
                "".join(parts),
                usage.get("prompt_tokens", 0),
                usage.get("completion_tokens", 0),
                usage.get("reasoning", ""),
                usage.get("reasoning_tokens", 0),
                usage.get("cached_tokens", 0),
            )
            return entry, entry["prompt_tokens"], entry["completion_tokens"]

        reserve = functools.partial(self._reservation, messages, params["max_tokens"])
        call = asyncio.ensure_future(self._call(stage, key, reserve, send, use_cache))
        call.add_done_callback(lambda _: deltas.put_nowait(_END))
        try:
            while (piece := await deltas.get()) is not _END:
                yield piece
            entry, cached = call.result()
        finally:
            if not call.done():
                call.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await call
        if cached:
            for piece in _pieces(entry["content"]):
                yield piece
        result.content, result.cached = entry["content"], cached
        result.prompt_tokens = entry.get("prompt_tokens", 0)
        result.completion_tokens = entry.get("completion_tokens", 0)


_END = object()  # the stream's task is over


def _entry(content: str, prompt_tokens: int, completion_tokens: int) -> dict:
    return {"content": content, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}


def _sample(content: str, size: int = 80) -> str:
    text = " ".join(content.split())
    return text if len(text) <= size else text[:size] + "..."


def _pieces(text: str, size: int = 24) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]
