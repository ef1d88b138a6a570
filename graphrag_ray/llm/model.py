"""The model call path and ChatModel. The layers are composed once (`_ModelBase._call`), outermost first, for
chat, streamed chat and embeddings (EmbeddingModel in embedding.py) alike:

    ledger   records every outcome (calls, tokens, cost, cache hits, retries, 429s, failures) per stage
    cache    a hit returns at once and costs nothing
    retry    tenacity around each attempt (fatal errors pass straight through)
    limiter  each attempt reserves what it expects to use, settled with the real usage; a 429 pauses all
    client   the HTTP call
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import uuid
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable

from graphrag_ray.config.settings import ModelConfig
from graphrag_ray.errors import LLMUnavailableError, UnusableAnswerError
from graphrag_ray.llm.cache import ResponseCache, cache_key
from graphrag_ray.llm.client import (Completion, OpenAIClient, RateLimitedError, StalledError, TimedOutError,
                                     TransientLLMError)
from graphrag_ray.llm.ledger import PaidJournal, Recording, UsageLedger, active_ledger
from graphrag_ray.llm.concurrency import AdaptiveConcurrency
from graphrag_ray.llm.retry import retrying
from graphrag_ray.llm.request_shape import is_reasoning_model
from graphrag_ray.llm.tokens import tokenizer_for
from graphrag_ray.parsing.llm_output import parse_json_object

DEFAULT_429_PAUSE = 1.0  # seconds, when a 429 carries no Retry-After
Send = Callable[[], Awaitable[tuple[dict, int, int]]]  # one request: (entry to cache, prompt tokens, completion tokens)
Reserve = Callable[[], tuple[int, int]]  # () -> (prompt tokens, the most the answer may hold), for the limiter


@dataclass
class ChatResult:
    content: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False
    problem: str | None = None  # why the answer is not usable as a whole (e.g. "cut off at max_tokens")
    cut: bool = False           # the answer stopped at max_tokens (usable or not)

    @property
    def complete(self) -> bool:
        return self.problem is None


CUT_OFF = "cut off at max_tokens"
MAX_ANEW = 20  # re-asks of one request across runs, each cached under a key of its own
CUT_BEFORE_ANSWER = "cut off at max_tokens before any answer (the budget went to reasoning)"
REPAIR = ("Your previous answer could not be used: it was {problem} (it began: {sample}). Answer again, completely "
          "and exactly in the format the instructions ask for, with nothing before or after it.")


class _ModelBase:
    def __init__(self, model_id: str, config: ModelConfig, *, cache: ResponseCache, limiter: Any,
                 ledger: UsageLedger, cautious_start: bool = False, check_first: bool = False,
                 retry_unusable: bool = False, session: str | None = None, journal: PaidJournal | None = None):
        self.model_id = model_id
        self.cautious_start = cautious_start  # batch jobs: one call alone until the first answer
        # queries: the endpoint is checked alongside the first request that goes out (not before every query:
        # one answered from the cache needs no endpoint, and the check would cost it the SDK's import)
        self.check_first = check_first
        self._endpoint_ok = False
        self._checks: dict[int, asyncio.Task] = {}
        self._in_flight: dict[str, asyncio.Future] = {}  # key -> the answer of the same request already sent
        self.config = config
        self.cache = cache
        self.limiter = limiter
        self.ledger = ledger
        self.retry_unusable = retry_unusable  # `index --retry-failures` (a later session asks anew anyway)
        self.session = session or uuid.uuid4().hex  # the command's: its unusable answers are its own
        self.journal = journal  # a batch job's: every paid call on disk at once
        self._clients: dict[int, OpenAIClient] = {}
        self._semaphores: dict[int, asyncio.Semaphore] = {}

    @property
    def tokenizer(self):
        """Loaded on first use: a short embedding input never needs one."""
        return tokenizer_for(self.config.model, self.config.encoding)

    @property
    def usage(self) -> Recording:
        """The ledger of the work running in this context (and the run's journal, for a batch job's worker)."""
        return Recording(active_ledger(self.ledger), self.journal)

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

    async def aclose(self) -> None:
        """Close the SDK client this model opened on the running loop (its connections belong to that loop; a
        later call opens a new one). Taken off first: two closes at once (Ctrl-C ending a call and its runner
        together) never close one client twice."""
        client = self._clients.pop(id(asyncio.get_running_loop()), None)
        if client is not None:
            await client.close()

    @property
    def _slots(self) -> AdaptiveConcurrency:
        loop_id = id(asyncio.get_running_loop())
        if loop_id not in self._semaphores:
            self._semaphores[loop_id] = AdaptiveConcurrency(self.config.concurrency, self.cautious_start)
        return self._semaphores[loop_id]

    def _limits(self) -> tuple[str, int | None, int | None]:
        rl = self.config.rate_limit
        return self.model_id, rl.rpm, rl.tpm

    # -- the layers, composed once: cache -> retry -> limiter -> client; the ledger records every outcome --
    async def _call(self, stage: str, key: str, reserve: Reserve, send: Send,
                    use_cache: bool = True) -> tuple[dict, bool]:
        """The cached entry for `key`, or one made by `send()` (one request: returns the entry to cache, and the
        prompt and completion tokens paid) through the retry loop and the limiter; `reserve()` gives what an attempt
        sends and the most it may receive, asked just before it is sent (limits learned meanwhile count). Returns
        (entry, cached)."""
        if use_cache and key is not None and (hit := self.cache.get(key)) is not None:
            self.usage.record(stage, self.config.model, cache_hits=1)
            return hit, True
        shared = self._in_flight.get(key) if use_cache and key is not None else None
        if shared is not None and shared.get_loop() is asyncio.get_running_loop():
            # the same request is already on its way (a corpus repeats a passage): wait for its answer, pay once
            entry = await asyncio.shield(shared)
            if entry is not None:
                self.usage.record(stage, self.config.model, cache_hits=1)
                return entry, True
        mine = asyncio.get_running_loop().create_future() if use_cache and key is not None else None
        if mine is not None:
            self._in_flight[key] = mine
        entry = None
        try:
            entry, prompt_tokens, completion_tokens = await self._paid_call(reserve, stage, send)
            self._record_paid(stage, prompt_tokens, completion_tokens, entry.get("reasoning_tokens", 0))
            # an unusable answer is recorded and cached too: paid once, and a deterministic model would repeat it
            self.usage.record(stage, self.config.model, unusable=int(bool(entry.get("unusable"))),
                              counted_here=int(bool(entry.get("counted_here"))))
            if key is not None:  # None: the caller caches the parts (an embedding batch, per text)
                self.cache.put(key, {**entry, "stage": stage})  # `cache clear --stage` finds it by this
        finally:
            if mine is not None:
                self._in_flight.pop(key, None)
                mine.set_result(entry)  # None (it failed, or was cancelled): those waiting ask themselves
        return entry, False

    async def _paid_call(self, reserve: Reserve, stage: str, send: Send) -> tuple[dict, int, int]:
        """One request through the retry loop (and alongside the endpoint check, for a query's first request)."""
        try:
            attempts = self._attempts(reserve, stage, send)
            return await (attempts if self._endpoint_ok or not self.check_first else self._alongside_check(attempts))
        except TransientLLMError as exc:
            self.usage.record(stage, self.config.model, failures=1)
            policy = self.config.retry
            why = f"still rate limited after {policy.rate_limit_deadline_s:g} s" if isinstance(exc, RateLimitedError) \
                else f"gave up after {policy.max_attempts} attempts"
            raise LLMUnavailableError(f"{self.client.where}: {why} ({exc})") from None

    async def _attempts(self, reserve: Reserve, stage: str, send: Send) -> tuple[dict, int, int]:
        # The first attempt goes without the retry machinery (tenacity costs ~5% of a worker's CPU per call, and
        # nearly every call succeeds at once); after a failure, tenacity takes over and sees that failure as its
        # own first attempt, so waits, attempt counts and the retry ledger are what they would be.
        try:
            return await self._sent(reserve, stage, send)
        except TransientLLMError as exc:
            first_failure = [exc]
        async for attempt in retrying(self.config.retry, lambda exc: self.usage.record(
                stage, self.config.model, retries=1)):
            with attempt:
                if first_failure:
                    raise first_failure.pop()
                return await self._sent(reserve, stage, send)

    async def _sent(self, reserve: Reserve, stage: str, send: Send) -> tuple[dict, int, int]:
        """One attempt. A request given up on after it was sent (request_timeout, a stalled stream) is counted
        `abandoned`: the server may have generated the answer no one read, and a provider bills what it generated."""
        try:
            return await self._limited(reserve, stage, send)
        except (TimedOutError, StalledError):
            self.usage.record(stage, self.config.model, abandoned=1)
            raise

    async def _alongside_check(self, work: Awaitable) -> Any:
        """`work`, after the endpoint check (an unreachable endpoint, a bad key, an unknown model are named within
        seconds, not after the whole retry budget). The check goes first, not beside the work: a local server
        serving one request at a time would make the check wait for the work (and call itself unreachable). Every
        request of the loop waits for the one check."""
        from graphrag_ray.llm.endpoint import endpoint_answers

        loop_id = id(asyncio.get_running_loop())
        check = self._checks.get(loop_id)
        if check is None:
            check = self._checks[loop_id] = asyncio.ensure_future(
                endpoint_answers(self.model_id, self.config, attempts=2, timeout=5.0))
            check.add_done_callback(lambda done: done.cancelled() or done.exception())  # read, even if unawaited
        try:
            await asyncio.shield(check)
            self._endpoint_ok = True  # it answered: no more checks
        except BaseException:
            work.close() if hasattr(work, "close") else None  # never started: no "was never awaited" warning
            raise
        return await work

    def _record_paid(self, stage: str, prompt_tokens: int, completion_tokens: int, reasoning_tokens: int = 0) -> None:
        price = self.config.price
        self.usage.record_call(stage, self.config.model, prompt_tokens, completion_tokens, price.input_per_1m,
                               price.output_per_1m, reasoning_tokens)

    async def _limited(self, reserve: Reserve, stage: str, send: Send) -> tuple[dict, int, int]:
        """One attempt under this process's adaptive in-flight cap and the job-wide limiter. What an attempt
        reserved is settled whatever happens: with what it used, or 0 when nothing was used. Limits the provider
        announces are passed on to the limiter."""
        key, rpm, tpm = self._limits()
        slots = self._slots
        await slots.open_if(lambda: self.limiter.job_has_answered(key))
        async with slots:
            # the SDK client is made (imported, on a process's first call: seconds on a slow worker) before the
            # grant: a request must reach the provider within the limiter's second of slack after its grant
            self.client  # noqa: B018
            prompt, max_completion = reserve()
            grant = await self.limiter.acquire(key, prompt, rpm, tpm, max_completion, stage)
            try:
                entry, prompt_tokens, completion_tokens = await send()
            except RateLimitedError as exc:
                self.usage.record(stage, self.config.model, rate_limited=1)
                self.limiter.settle(key, grant, 0)
                slots.refused()
                self.limiter.refused(key, exc.retry_after if exc.retry_after is not None else DEFAULT_429_PAUSE,
                                     rpm, tpm)
                self.limiter.learn(key, rpm, tpm, *self.client.announced_limits)
                raise
            except (StalledError, TimedOutError):
                # the server may still be generating it: fewer requests at once, so the re-send does not pile on
                self.limiter.settle(key, grant, 0)
                slots.refused()
                raise
            except BaseException:
                self.limiter.settle(key, grant, 0)
                raise
            self.limiter.settle(key, grant, prompt_tokens + completion_tokens,
                                completion_tokens if max_completion else None, stage)
            slots.succeeded()
            self.limiter.learn(key, rpm, tpm, *self.client.announced_limits)
            self.limiter.answer_seen(key)
            return entry, prompt_tokens, completion_tokens

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_clients"], state["_semaphores"], state["_checks"], state["_in_flight"] = {}, {}, {}, {}
        return state


class ChatModel(_ModelBase):

    def _params(self, json_mode: bool, response_format: dict | None, max_tokens: int | None,
                temperature: float | None, extra: dict[str, Any]) -> dict[str, Any]:
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

    def count(self, messages: list[dict]) -> int:
        return self.tokenizer.count_messages(messages)

    def _reservation(self, messages: list[dict], max_tokens: int) -> tuple[int, int]:
        """(prompt tokens, the most the answer may hold) for the limiter, which reserves the prompt and the answer
        it expects from every answer the job has had (ModelWindow.reservation). Not counted at all while no TPM
        limit is configured or announced."""
        if not (self.config.rate_limit.tpm or self.limiter.knows_limits(self.model_id)):
            return 0, 0
        return self.count(messages), max_tokens

    async def chat(self, messages: list[dict], *, stage: str, json_mode: bool = False,
                   response_format: dict | None = None, max_tokens: int | None = None,
                   temperature: float | None = None, use_cache: bool = True,
                   validate: Callable[[str], bool] | None = None, partial_ok: bool = False,
                   **extra: Any) -> ChatResult:
        """One completion. An answer that is not JSON where JSON was asked for, or that `validate(content)`
        rejects, is unusable: it is paid for once (recorded, and cached - a deterministic model would only repeat
        it) and asked again once, the request changed by a repair instruction (never by a temperature: reasoning
        models refuse any but their default). An answer cut at max_tokens before any of it was written (the budget
        went to reasoning) is asked again once with twice the budget. With
        `partial_ok`, an answer cut at max_tokens is returned as it is (`problem` says so: the caller keeps its
        complete records) instead of being asked again - it would be cut again. A second unusable answer raises
        UnusableAnswerError, naming the problem and how the answer began. With `retry_unusable` (a retry of the
        failed items), a re-ask whose unusable answer came from the cache is sent again."""
        params = self._params(json_mode, response_format, max_tokens, temperature, extra)

        def ask(msgs: list[dict], settings: dict):
            return self._chat_once(msgs, settings, stage, use_cache, validate)

        first = await ask(messages, params)
        if first.complete or (partial_ok and first.problem == CUT_OFF):
            return first
        if first.problem == CUT_BEFORE_ANSWER:
            repaired, changed = messages, {**params, "max_tokens": 2 * params["max_tokens"]}
        else:
            sample = json.dumps(_sample(first.content), ensure_ascii=False)
            repaired = messages + [{"role": "user", "content": REPAIR.format(problem=first.problem, sample=sample)}]
            changed = params
        second = await ask(repaired, changed)
        if second.complete or (partial_ok and second.problem == CUT_OFF):
            return second
        self.usage.record(stage, self.config.model, failures=1)
        raise UnusableAnswerError(f"{self.client.where}: the answer was unusable twice ({second.problem}) | "
                                  f"answer began: {json.dumps(_sample(second.content), ensure_ascii=False)}")

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

    async def _chat_once(self, messages: list[dict], params: dict, stage: str, use_cache: bool,
                         validate: Callable[[str], bool] | None) -> ChatResult:
        """One request. A cached answer is judged again (the parser may have learned since); an unusable one is
        served only to the command that paid for it (so it does not pay twice) - any later run, query or retry asks
        again, under a key of its own (`anew`), so no cached record is ever overwritten."""
        wants_json = "response_format" in params
        for anew in range(MAX_ANEW):
            key = cache_key("chat", self.config.model, {"messages": messages, "params": params,
                                                         **({"anew": anew} if anew else {})})
            hit = self.cache.get(key) if use_cache else None
            if hit is None or hit.get("session") == self.session or \
                    self._problem(hit["content"], bool(hit.get("cut")), wants_json, validate) is None:
                break

        async def send() -> tuple[dict, int, int]:
            received: list[str] = []
            try:
                completion: Completion = await self.client.chat(messages, params, received)
            except asyncio.CancelledError:
                if received:  # stopped (Ctrl-C, a fatal error elsewhere) while its answer came: it was billed
                    prompt, completion_tokens = self.count(messages), self.tokenizer.count("".join(received))
                    self._record_paid(stage, prompt, completion_tokens)
                    self.usage.record(stage, self.config.model, unusable=1, counted_here=1)
                raise
            entry = self._paid_entry(messages, completion.content, completion.prompt_tokens,
                                     completion.completion_tokens, completion.reasoning,
                                     completion.reasoning_tokens)
            if completion.finish_reason == "length":
                entry["cut"] = True
            if problem := self._problem(completion.content, completion.finish_reason == "length", wants_json,
                                        validate):
                entry["unusable"], entry["session"] = problem, self.session
            return entry, entry["prompt_tokens"], entry["completion_tokens"]

        reserve = functools.partial(self._reservation, messages, params["max_tokens"])
        entry, cached = await self._call(stage, key, reserve, send, use_cache)
        problem = self._problem(entry["content"], bool(entry.get("cut")), wants_json, validate) if cached \
            else entry.get("unusable")
        return ChatResult(entry["content"], entry.get("prompt_tokens", 0), entry.get("completion_tokens", 0), cached,
                          problem, bool(entry.get("cut")))

    def _paid_entry(self, messages: list[dict], content: str, prompt_tokens: int, completion_tokens: int,
                    reasoning: str = "", reasoning_tokens: int = 0) -> dict:
        """The entry to cache for a paid answer (its reasoning text is not kept: only its tokens). A server that
        reports no usage (llama.cpp's in streaming mode, some proxies) is counted with the tokenizer here, and the
        entry says so; reasoning a server sends but does not count is counted here too (it is billed as output)."""
        entry = _entry(content, prompt_tokens, completion_tokens)
        if not prompt_tokens and not completion_tokens:
            reasoning_tokens = self.tokenizer.count(reasoning) if reasoning else 0
            entry.update(prompt_tokens=self.count(messages), counted_here=True,
                         completion_tokens=self.tokenizer.count(content) + reasoning_tokens)
        elif reasoning and not reasoning_tokens:
            reasoning_tokens = self.tokenizer.count(reasoning)
        if reasoning_tokens:
            entry["reasoning_tokens"] = reasoning_tokens
        return entry

    async def stream(self, messages: list[dict], *, stage: str, max_tokens: int | None = None,
                     temperature: float | None = None, use_cache: bool = True,
                     result: ChatResult | None = None, **extra: Any) -> AsyncIterator[str]:
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
                if not "".join(parts).strip() and usage.get("finish_reason") == "length" \
                        and budget == params["max_tokens"]:
                    # the budget went to reasoning and nothing was shown: paid for, and asked once with twice it
                    entry = self._paid_entry(messages, "", usage.get("prompt_tokens", 0),
                                             usage.get("completion_tokens", 0), usage.get("reasoning", ""),
                                             usage.get("reasoning_tokens", 0))
                    self._record_paid(stage, entry["prompt_tokens"], entry["completion_tokens"],
                                      entry.get("reasoning_tokens", 0))
                    self.usage.record(stage, self.config.model, unusable=1)
                    return await send(2 * budget)
            except TransientLLMError as exc:
                if parts:  # text already shown: a retry would repeat it. What was generated was paid for
                    prompt, completion = self.count(messages), self.tokenizer.count("".join(parts))
                    self._record_paid(stage, prompt, completion)
                    self.usage.record(stage, self.config.model, unusable=1, counted_here=1)
                    raise LLMUnavailableError(f"stream from {self.client.where} broke: {exc} (paid for: {prompt:,} "
                                              f"prompt + {completion:,} completion tokens, counted here)") from None
                raise
            entry = self._paid_entry(messages, "".join(parts), usage.get("prompt_tokens", 0),
                                     usage.get("completion_tokens", 0), usage.get("reasoning", ""),
                                     usage.get("reasoning_tokens", 0))
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
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]
