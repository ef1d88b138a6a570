"""The OpenAI-compatible simulator server (aiohttp).

Routes: /v1/chat/completions (plain and SSE streaming), /v1/embeddings, /v1/models, and for tests
/v1/_stats (what it served) and /v1/_reset. Knobs: latency, server-side RPM/TPM limits counted over a sliding
60-s window as providers do (429 + Retry-After beyond; OpenAI's x-ratelimit-* headers on every answer), limits that
change mid-run, deterministic fault rates, sloppy answers (no completion delimiter, garbage), an optional API key,
a list of known models.
Binds to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import math
import time
import uuid
from collections import Counter, defaultdict

import numpy as np
from aiohttp import web

from graphrag_ray.llm.local_embedding import ngram_vector
from graphrag_ray.llm.tokens import count_chat_tokens, tokenizer_for
from graphrag_ray.simulate.batches import BATCH_HEADER, BatchService
from graphrag_ray.simulate.config import SimulatorConfig, SlidingWindow
from graphrag_ray.simulate.prompt_cache import PrefixCache, prompt_token_ids
from graphrag_ray.simulate.responders import COMPLETE as COMPLETION_DELIMITER
from graphrag_ray.simulate.responders import respond
from graphrag_ray.simulate.shapes import in_prompts_delimiter, reasoning_text, refusal, reshape


class Simulator:
    def __init__(self, config: SimulatorConfig):
        self.config = config
        self.counts: Counter = Counter()
        self.chat_in_progress = 0  # chat requests arrived and not yet answered (cut_streams)
        self.attempts: Counter = Counter()
        self.started = time.monotonic()
        # per model, as providers limit each model of a key separately
        self.windows: dict[str, SlidingWindow] = defaultdict(SlidingWindow)
        self.per_second: dict[str, Counter] = defaultdict(Counter)  # tokens admitted per second since start
        self.requests_per_second: dict[str, Counter] = defaultdict(Counter)
        self.answered: set[str] = set()  # models that have sent an answer
        self.sends: Counter = Counter()  # chat requests by their messages and budget: a re-send counts twice
        self.generating = asyncio.Lock()  # a serial server's one generation slot
        self.prompt_cache = PrefixCache()  # used with config.prompt_cache
        self.batches = BatchService(config, self.counts)  # the Files and Batches endpoints

    def limits(self) -> tuple[int | None, int | None]:
        """The (rpm, tpm) in force now: the configured ones, or the latest scheduled change already reached."""
        rpm, tpm = self.config.rpm, self.config.tpm
        elapsed = time.monotonic() - self.started
        for after, new_rpm, new_tpm in sorted(self.config.limits_after):
            if elapsed >= after:
                rpm, tpm = new_rpm, new_tpm
        return rpm, tpm

    # -- admission --------------------------------------------------------------------------------
    def _check_auth(self, request: web.Request) -> web.Response | None:
        if self.config.api_key is None:
            return None
        header = request.headers.get("Authorization", "")
        if header != f"Bearer {self.config.api_key}":
            self.counts["401"] += 1
            return _error(401, "Incorrect API key provided.", "invalid_api_key")
        return None

    def _check_model(self, model: str) -> web.Response | None:
        if self.config.models and model not in self.config.models:
            self.counts["404"] += 1
            return _error(404, f"The model `{model}` does not exist.", "model_not_found")
        return None

    def _admit(self, model: str, tokens: int) -> web.Response | None:
        """Server-side RPM/TPM of `model` over a sliding 60-s window: admit and charge, or answer 429 with how long
        to wait."""
        rpm, tpm = self.limits()
        if rpm is None and tpm is None:
            return None
        now = time.monotonic()
        wait = self.windows[model].wait_for(now, tokens, rpm, tpm)
        if wait > 0:
            self.counts["429_limit"] += 1
            return self._too_many(model, wait)
        self.windows[model].admit(now, tokens)
        self.per_second[model][int(now - self.started)] += tokens
        self.requests_per_second[model][int(now - self.started)] += 1
        return None

    def rate_headers(self, model: str) -> dict[str, str]:
        """OpenAI's x-ratelimit-* headers for `model`'s limits in force (none when there are none)."""
        rpm, tpm = self.limits()
        window = self.windows[model]
        headers = {}
        if rpm:
            headers["x-ratelimit-limit-requests"] = str(rpm)
            headers["x-ratelimit-remaining-requests"] = str(max(0, rpm - len(window.admitted)))
            headers["x-ratelimit-reset-requests"] = "60s"
        if tpm:
            headers["x-ratelimit-limit-tokens"] = str(tpm)
            headers["x-ratelimit-remaining-tokens"] = str(max(0, tpm - window.tokens))
            headers["x-ratelimit-reset-tokens"] = "60s"
        return headers

    def _arrived(self, model: str) -> None:
        """`before_first_answer_<model>`: requests that reached the model before it had answered any - 1 when a
        client probes with one call first, its whole first burst when it does not."""
        if model not in self.answered:
            self.counts[f"before_first_answer_{model}"] += 1

    def _served(
        self, kind: str, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0, batch: bool = False
    ) -> None:
        """Count a successful answer, per kind of prompt (benchmarks split calls and tokens by stage with these)
        and in time (first/last answer: the window over which limit utilisation is measured)."""
        now = time.time()
        self.counts["ok"] += 1
        self.counts[f"kind_{kind}"] += 1
        if batch:
            self.counts["batch_served"] += 1
        elif kind != "embedding":
            self.counts["sync_chat"] += 1
        self.counts[f"prompt_tokens_{kind}"] += prompt_tokens
        self.counts[f"completion_tokens_{kind}"] += completion_tokens
        self.counts["prompt_tokens"] += prompt_tokens
        self.counts["completion_tokens"] += completion_tokens
        if cached_tokens:
            self.counts[f"cached_tokens_{kind}"] += cached_tokens
            self.counts["cached_tokens"] += cached_tokens
        self.counts["first_ok_at"] = self.counts.get("first_ok_at") or now
        self.counts["last_ok_at"] = now

    def _too_many(self, model: str, wait: float) -> web.Response:
        headers = {
            "retry-after": str(max(1, math.ceil(wait))),
            "retry-after-ms": str(int(wait * 1000) + 1),
            **self.rate_headers(model),
        }
        return _error(429, "Rate limit reached.", "rate_limit_exceeded", headers)

    async def _fault(self, request: web.Request, body: dict) -> web.StreamResponse | None:
        key = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        attempt = self.attempts[key]
        self.attempts[key] += 1
        kind = self.config.faults.draw(self.config.seed, key, attempt)
        if kind is None or kind == "malformed":
            request["malformed"] = kind == "malformed"
            return None
        self.counts[f"fault_{kind}"] += 1
        if kind == "429":
            wait = self.config.faults.retry_after
            return _error(
                429,
                "Rate limit reached.",
                "rate_limit_exceeded",
                {"retry-after": str(max(1, math.ceil(wait))), "retry-after-ms": str(int(wait * 1000))},
            )
        if kind == "503":  # overloaded: come back after Retry-After (as Azure OpenAI answers)
            wait = self.config.faults.retry_after
            return _error(
                503,
                "The engine is currently overloaded, please try again later.",
                "server_overloaded",
                {"retry-after": str(max(1, math.ceil(wait))), "retry-after-ms": str(int(wait * 1000))},
            )
        if kind == "500":
            return _error(500, "The server had an error while processing your request.", "server_error")
        if kind == "hang":
            await asyncio.sleep(self.config.faults.hang_seconds)
            return _error(504, "timeout", "timeout")
        # drop: start a response, then cut the connection
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        await response.prepare(request)
        await response.write(b'{"id": "')
        request.transport.abort()
        return response

    # -- routes -----------------------------------------------------------------------------------
    async def _accepted(self, request: web.Request) -> tuple[dict | None, web.Response | None]:
        """(the body, None) for an authorised request naming a known model; (None, the refusal) otherwise."""
        if (denied := self._check_auth(request)) is not None:
            return None, denied
        body = await request.json()
        if (denied := self._check_model(body.get("model", ""))) is not None:
            return None, denied
        return body, None

    def _answer(self, body: dict) -> tuple[str, str]:
        """(kind, content) as the prompt asks, or as a sloppy model answers: extraction without the completion
        delimiter (common with small local models), or garbage for everything."""
        kind, content = respond(body)
        if self.config.answer_mode == "garbage":
            digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
            return kind, f"I am not sure what you mean. {digest[:12]} ... maybe try again?"
        if self.config.answer_mode == "no-delimiter":
            content = content.replace(COMPLETION_DELIMITER, "").rstrip()
        prompt = "\n".join(str(m.get("content") or "") for m in body.get("messages") or [])
        if self.config.answer_shape == "clean":
            return kind, in_prompts_delimiter(kind, content, prompt)
        return kind, reshape(kind, content, self.config.answer_shape, prompt)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        body, denied = await self._accepted(request)
        if denied is not None:
            return denied
        if self.config.fail_containing and self.config.fail_containing in json.dumps(body, ensure_ascii=False):
            self.counts["fault_permanent"] += 1
            return _error(500, "The server had an error while processing your request.", "server_error")
        if self.config.refuse_containing and self.config.refuse_containing in json.dumps(body, ensure_ascii=False):
            self.counts["400_refused"] += 1
            return _error(400, "Invalid request: the request could not be processed.", "invalid_request_error")
        family = self.config.model_family
        if (refused := refusal(family, body)) is not None:
            self.counts["400_refused"] += 1
            return _error(400, refused[0], refused[2], param=refused[1])
        model = body.get("model", "")
        self._arrived(model)
        self.chat_in_progress += 1
        try:
            return await self._chat_answer(request, body, model, family)
        finally:
            self.chat_in_progress -= 1

    async def _chat_answer(self, request: web.Request, body: dict, model: str, family: str) -> web.StreamResponse:
        self.sends[
            hashlib.sha256(
                json.dumps(
                    [body.get("messages"), body.get("max_tokens"), body.get("max_completion_tokens")], sort_keys=True
                ).encode()
            ).hexdigest()
        ] += 1
        tokenizer = tokenizer_for(model)
        kind, content = self._answer(body)
        prompt_tokens = count_chat_tokens(tokenizer, body.get("messages") or [])
        if self.config.prompt_cache:
            ids = prompt_token_ids(tokenizer, body.get("messages") or [])
            request["cached_tokens"] = self.prompt_cache.serve(ids, prompt_tokens)
        reasoning = reasoning_text(family, body, self.config.reasoning_tokens)
        if family == "think-tags":
            content, reasoning = f"<think>\n{reasoning}\n</think>\n\n{content}", ""
        thought = tokenizer.encode(reasoning)
        finish = "stop"
        tokens = tokenizer.encode(content)
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        if limit and len(thought) >= int(limit):  # the budget ran out inside the reasoning: no answer at all
            reasoning, thought, content, tokens, finish = (
                tokenizer.decode(thought[: int(limit)]),
                thought[: int(limit)],
                "",
                [],
                "length",
            )
        elif limit and len(thought) + len(tokens) > int(limit):  # as every provider does: it stops at max_tokens
            tokens = tokens[: int(limit) - len(thought)]
            content, finish = tokenizer.decode(tokens), "length"
        completion_tokens = len(thought) + len(tokens)
        if (denied := self._admit(model, prompt_tokens + completion_tokens)) is not None:
            return denied
        if (faulty := await self._fault(request, body)) is not None:
            return faulty
        if request.get("malformed"):
            self.counts["fault_malformed"] += 1
            content = content[: max(1, len(content) // 2)] + ' {"broken'
        if self.config.serial:
            async with self.generating:  # as llama.cpp with one slot: the others wait, an abandoned one runs on
                return await self._generated(
                    request,
                    body,
                    model,
                    kind,
                    content,
                    reasoning,
                    thought,
                    prompt_tokens,
                    completion_tokens,
                    finish,
                    family,
                )
        return await self._generated(
            request, body, model, kind, content, reasoning, thought, prompt_tokens, completion_tokens, finish, family
        )

    async def _generated(
        self, request, body, model, kind, content, reasoning, thought, prompt_tokens, completion_tokens, finish, family
    ) -> web.StreamResponse:
        delay = self.config.latency + self.config.latency_per_token * completion_tokens
        if self.config.prefill_rate:  # the prompt is read before anything is sent
            delay += prompt_tokens / self.config.prefill_rate
        if self.config.stream_rate and not body.get("stream"):  # generated in full before the answer goes out
            delay += completion_tokens / self.config.stream_rate
        if delay > 0:
            await asyncio.sleep(delay)
        cached = request.get("cached_tokens", 0)
        if not body.get("stream"):
            self._served(kind, prompt_tokens, completion_tokens, cached, BATCH_HEADER in request.headers)
        self.answered.add(model)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        if self.config.prompt_cache:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        if thought:
            usage["completion_tokens_details"] = {"reasoning_tokens": len(thought)}
            self.counts["reasoning_tokens"] += len(thought)
        cid = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        if body.get("stream"):
            response, delivered = await self._stream(request, cid, model, content, usage, body, finish, reasoning)
            if delivered:  # a stream is billed once it reached the client whole: what a client that dies sees
                self._served(kind, prompt_tokens, completion_tokens, cached)
            return response
        message = {"role": "assistant", "content": content}
        if family == "deepseek-reasoner":
            message["reasoning_content"] = reasoning
        return web.json_response(
            headers=self.rate_headers(model),
            data={
                "id": cid,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "finish_reason": finish, "message": message}],
                **({} if self.config.no_usage else {"usage": usage}),
            },
        )

    async def _stream(
        self, request, cid, model, content, usage, body, finish: str = "stop", reasoning: str = ""
    ) -> tuple[web.StreamResponse, bool]:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", **self.rate_headers(model)}
        )
        await response.prepare(request)
        gone = False

        async def write(data: bytes, tokens: int = 0) -> None:
            """Send a piece after the time it takes to generate; a client gone away is generated for anyway."""
            nonlocal gone
            if tokens and self.config.stream_rate:
                await asyncio.sleep(tokens / self.config.stream_rate)
            if gone:
                return
            try:
                await response.write(data)
            except (ConnectionResetError, RuntimeError):
                gone = True
                self.counts["abandoned_answers"] += 1

        def chunk(delta: dict, finish: str | None = None, with_usage: dict | None = None) -> bytes:
            payload = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [] if with_usage else [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            if with_usage:
                payload["usage"] = with_usage
            return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()

        pieces = [content[i : i + 8] for i in range(0, len(content), 8)]
        per_piece = usage["completion_tokens"] / max(1, len(pieces) + (len(reasoning) + 15) // 16)
        await write(chunk({"role": "assistant", "content": ""}))
        if reasoning and self.config.model_family == "deepseek-reasoner":
            for i in range(0, len(reasoning), 16):
                await write(chunk({"reasoning_content": reasoning[i : i + 16], "content": None}), per_piece)
        cut = False
        for i, piece in enumerate(pieces):
            if self.config.cut_streams and self.chat_in_progress > 1:  # another request waits: this one is cut
                self.counts["cut_streams"] += 1
                cut = True
                break
            await write(chunk({"content": piece}), per_piece)
            if i == 0 and self.config.stream_stall:
                await asyncio.sleep(self.config.stream_stall)
        if not cut:
            await write(chunk({}, finish))
            if (body.get("stream_options") or {}).get("include_usage") and not self.config.no_usage:
                await write(chunk({}, None, usage))
        await write(b"data: [DONE]\n\n")
        if not gone:
            with contextlib.suppress(ConnectionResetError, RuntimeError):
                await response.write_eof()
        return response, not gone and not cut

    async def embeddings(self, request: web.Request) -> web.Response:
        body, denied = await self._accepted(request)
        if denied is not None:
            return denied
        model = body.get("model", "")
        self._arrived(model)
        inputs = body.get("input")
        inputs = [inputs] if isinstance(inputs, str) else list(inputs or [])
        tokenizer = tokenizer_for(model)
        tokens = sum(tokenizer.count(t) if isinstance(t, str) else len(t) for t in inputs)
        if (denied := self._admit(model, tokens)) is not None:
            return denied
        if (faulty := await self._fault(request, body)) is not None:
            return faulty
        pause = self.config.latency if self.config.embedding_latency is None else self.config.embedding_latency
        if pause > 0:
            await asyncio.sleep(pause)
        dim = int(body.get("dimensions") or self.config.embedding_dim)
        self._served("embedding", tokens, 0)
        self.answered.add(model)
        self.counts["embedding_inputs"] += len(inputs)
        # what the openai SDK asks for by default; some servers ignore it and send floats
        as_base64 = body.get("encoding_format") == "base64" and not self.config.float_embeddings

        def encode(vector: list[float]):
            return base64.b64encode(np.asarray(vector, dtype=np.float32).tobytes()).decode() if as_base64 else vector

        return web.json_response(
            headers=self.rate_headers(model),
            data={
                "object": "list",
                "model": model,
                "data": [
                    {"object": "embedding", "index": i, "embedding": encode(ngram_vector(str(t), dim))}
                    for i, t in enumerate(inputs)
                ],
                **({} if self.config.no_usage else {"usage": {"prompt_tokens": tokens, "total_tokens": tokens}}),
            },
        )

    async def models(self, request: web.Request) -> web.Response:
        if (denied := self._check_auth(request)) is not None:
            return denied
        if self.config.busy_models and self.config.serial:  # llama.cpp: the model list waits for the model lock
            async with self.generating:
                pass
        names = self.config.models  # empty when it accepts any model name
        return web.json_response(
            {"object": "list", "data": [{"id": n, "object": "model", "owned_by": "simulator"} for n in names]}
        )

    async def stats(self, request: web.Request) -> web.Response:
        """What was served; `max_tokens_60s`: the most tokens one model was admitted in any 60 s (whole seconds) of
        the run."""

        def busiest(per_model: dict[str, Counter]) -> int:
            return max(
                (sum(counts[t] for t in range(s, s + 60)) for counts in per_model.values() for s in sorted(counts)),
                default=0,
            )

        timeline = Counter()
        for counts in self.per_second.values():
            timeline.update(counts)
        return web.json_response(
            {
                **self.counts,
                "max_tokens_60s": busiest(self.per_second),
                "max_sends_of_one_request": max(self.sends.values(), default=0),
                **self.batches.stats(),
                "max_requests_60s": busiest(self.requests_per_second),
                "tokens_per_second": {str(k): v for k, v in sorted(timeline.items())},
            }
        )

    async def reset(self, request: web.Request) -> web.Response:
        self.counts.clear()
        self.attempts.clear()
        self.per_second.clear()
        self.requests_per_second.clear()
        self.answered.clear()
        self.sends.clear()
        self.prompt_cache.clear()
        self.batches.reset()
        return web.json_response({"reset": True})

    def app(self) -> web.Application:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self.chat_completions)
        app.router.add_post("/v1/embeddings", self.embeddings)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/v1/_stats", self.stats)
        app.router.add_post("/v1/_reset", self.reset)
        self.batches.routes(app)
        return app


def _error(status: int, message: str, code: str, headers: dict | None = None, param: str | None = None) -> web.Response:
    kind = "invalid_request_error" if status == 400 else code
    return web.json_response(
        {"error": {"message": message, "type": kind, "param": param, "code": code}}, status=status, headers=headers
    )


def serve(config: SimulatorConfig, host: str = "127.0.0.1", port: int = 8765, ready=None) -> None:
    """Run until interrupted; prints (or passes to `ready`) the base URL once listening."""

    async def main():
        runner = web.AppRunner(Simulator(config).app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = site._server.sockets[0].getsockname()[1]
        url = f"http://{host}:{bound}/v1"
        (ready or (lambda u: print(f"simulator listening on {u}", flush=True)))(url)
        await asyncio.Event().wait()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
