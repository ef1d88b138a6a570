"""The model call path and ChatModel. The layers are composed once (`ModelBase._call`), outermost first, for
chat, streamed chat and embeddings (ChatModel in model.py, EmbeddingModel in embedding.py) alike:

    ledger   records every outcome (calls, tokens, cost, cache hits, retries, 429s, failures) per stage
    cache    a hit returns at once and costs nothing
    retry    tenacity around each attempt (fatal errors pass straight through)
    limiter  each attempt reserves what it expects to use, settled with the real usage; a 429 pauses all
    client   the HTTP call
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from graphrag_ray.config.settings import ModelConfig
from graphrag_ray.errors import LLMUnavailableError
from graphrag_ray.llm.cache import ResponseCache
from graphrag_ray.llm.client import OpenAIClient
from graphrag_ray.llm.concurrency import AdaptiveConcurrency
from graphrag_ray.llm.deadline import within_deadline
from graphrag_ray.llm.ledger import PaidJournal, Recording, UsageLedger, active_ledger
from graphrag_ray.llm.outcomes import CutStreamError, RateLimitedError, StalledError, TimedOutError, TransientLLMError
from graphrag_ray.llm.prices import price_of
from graphrag_ray.llm.retry import retrying
from graphrag_ray.llm.tokens import tokenizer_for

DEFAULT_429_PAUSE = 1.0  # seconds, when a 429 carries no Retry-After
Send = Callable[[], Awaitable[tuple[dict, int, int]]]  # one request: (entry to cache, prompt tokens, completion tokens)
Reserve = Callable[[], tuple[int, int]]  # () -> (prompt tokens, the most the answer may hold), for the limiter


class ModelBase:
    def __init__(
        self,
        model_id: str,
        config: ModelConfig,
        *,
        cache: ResponseCache,
        limiter: Any,
        ledger: UsageLedger,
        cautious_start: bool = False,
        check_first: bool = False,
        retry_unusable: bool = False,
        session: str | None = None,
        journal: PaidJournal | None = None,
    ):
        self.model_id = model_id
        self.cautious_start = cautious_start  # batch jobs: one call alone until the first answer
        # queries: the endpoint is checked alongside the first request that goes out (not before every query:
        # one answered from the cache needs no endpoint, and the check would cost it the SDK's import)
        self.check_first = check_first
        self._endpoint_ok = False
        self._checks: dict[int, asyncio.Task] = {}
        self._in_flight: dict[str, asyncio.Future] = {}  # key -> the answer of the same request already sent
        self.batch_answers: set[str] = set()  # keys of Batch API answers its partition's passes read (batched.py)
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
    async def _call(
        self, stage: str, key: str, reserve: Reserve, send: Send, use_cache: bool = True
    ) -> tuple[dict, bool]:
        """The cached entry for `key`, or one made by `send()` (one request: returns the entry to cache, and the
        prompt and completion tokens paid) through the retry loop and the limiter; `reserve()` gives what an attempt
        sends and the most it may receive, asked just before it is sent (limits learned meanwhile count). Returns
        (entry, cached)."""
        if use_cache and key is not None and (hit := self.cache.get(key)) is not None:
            if key not in self.batch_answers:  # a Batch API job's answer, read again by the next pass: not free
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
            self._record_paid(stage, {**entry, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens})
            # an unusable answer is recorded and cached too: paid once, and a deterministic model would repeat it
            self.usage.record(
                stage,
                self.config.model,
                unusable=int(bool(entry.get("unusable"))),
                counted_here=int(bool(entry.get("counted_here"))),
            )
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
            async with within_deadline(self.client.where):  # a question's calls end by its deadline
                return await (
                    attempts if self._endpoint_ok or not self.check_first else self._alongside_check(attempts)
                )
        except LLMUnavailableError:
            self.usage.record(stage, self.config.model, failures=1)
            raise
        except TransientLLMError as exc:
            self.usage.record(stage, self.config.model, failures=1)
            policy = self.config.retry
            why = (
                f"still rate limited after {policy.rate_limit_deadline_s:g} s"
                if isinstance(exc, RateLimitedError)
                else f"gave up after {policy.max_attempts} attempts"
            )
            raise LLMUnavailableError(f"{self.client.where}: {why} ({exc})") from None

    async def _attempts(self, reserve: Reserve, stage: str, send: Send) -> tuple[dict, int, int]:
        # The first attempt goes without the retry machinery (tenacity costs ~5% of a worker's CPU per call, and
        # nearly every call succeeds at once); after a failure, tenacity takes over and sees that failure as its
        # own first attempt, so waits, attempt counts and the retry ledger are what they would be.
        try:
            return await self._sent(reserve, stage, send)
        except TransientLLMError as exc:
            first_failure = [exc]
        async for attempt in retrying(
            self.config.retry, lambda exc: self.usage.record(stage, self.config.model, retries=1)
        ):
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
        except CutStreamError:
            self.usage.record(stage, self.config.model, cut_streams=1)
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
                endpoint_answers(self.model_id, self.config, attempts=2, timeout=5.0)
            )
            check.add_done_callback(lambda done: done.cancelled() or done.exception())  # read, even if unawaited
        try:
            await asyncio.shield(check)
            self._endpoint_ok = True  # it answered: no more checks
        except BaseException:
            work.close() if hasattr(work, "close") else None  # never started: no "was never awaited" warning
            raise
        return await work

    def _record_paid(self, stage: str, paid: dict) -> None:
        """One paid call in the ledger: `paid` holds its prompt, completion, reasoning and cached tokens (a cache
        entry, or the counts of a stream cut short), priced at the model's price (llm/prices.py)."""
        self.usage.record_call(
            stage,
            self.config.model,
            paid.get("prompt_tokens", 0),
            paid.get("completion_tokens", 0),
            price_of(self.config),
            reasoning_tokens=paid.get("reasoning_tokens", 0),
            cached_tokens=paid.get("cached_tokens", 0),
            batch=bool(paid.get("batch")),
        )

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
                self.limiter.refused(
                    key, exc.retry_after if exc.retry_after is not None else DEFAULT_429_PAUSE, rpm, tpm
                )
                self.limiter.learn(key, rpm, tpm, *self.client.announced_limits)
                raise
            except (StalledError, TimedOutError, CutStreamError):
                # the server may still be generating it, or cuts streams while others wait: fewer requests at once,
                # so the re-send does not pile on
                self.limiter.settle(key, grant, 0)
                slots.refused()
                raise
            except BaseException:
                self.limiter.settle(key, grant, 0)
                raise
            self.limiter.settle(
                key, grant, prompt_tokens + completion_tokens, completion_tokens if max_completion else None, stage
            )
            slots.succeeded()
            self.limiter.learn(key, rpm, tpm, *self.client.announced_limits)
            self.limiter.answer_seen(key)
            return entry, prompt_tokens, completion_tokens

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_clients"], state["_semaphores"], state["_checks"], state["_in_flight"] = {}, {}, {}, {}
        return state
