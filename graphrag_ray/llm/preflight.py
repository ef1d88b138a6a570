"""Checks that a model endpoint answers before a command spends anything.

`check_endpoints` (index, and every other command that calls models): each endpoint answers, accepts its key and
knows the model - GET /models, no tokens, so a fully cached re-run still makes zero LLM calls. `probe_models`
(`graphrag-ray check`): one tiny real request per model, timed.
"""

from __future__ import annotations

import asyncio
import time

from graphrag_ray.config.settings import RetryConfig, Settings
from graphrag_ray.llm.cache import ResponseCache
from graphrag_ray.llm.embedding import EmbeddingModel
from graphrag_ray.llm.endpoint import endpoint_answers
from graphrag_ray.llm.model import ChatModel
from graphrag_ray.llm.models import Models


async def endpoints_answer(settings: Settings, model_ids: list[str]) -> None:
    """Raises a one-line error naming the model and the cause when an endpoint is unusable."""
    # at once: two models on one silent endpoint are said within one check's timeout, not one after the other
    await asyncio.gather(
        *(endpoint_answers(model_id, settings.model(model_id)) for model_id in dict.fromkeys(model_ids))
    )


def check_endpoints(settings: Settings, model_ids: list[str]) -> None:
    if model_ids:
        asyncio.run(endpoints_answer(settings, model_ids))  # each check closes its own client


async def probe_models(models: Models, model_ids: list[str]) -> list[str]:
    """One tiny uncached request per model with a short retry budget, so a bad key, a wrong model name or
    an unreachable endpoint stops a command in seconds instead of after the whole retry budget."""
    lines = []
    for model_id in model_ids:
        cfg = models.settings.model(model_id)
        if cfg.type == "local_embedding":
            lines.append(f"ok: {model_id} is computed here (local_embedding)")
            continue
        await endpoint_answers(model_id, cfg, attempts=2, busy_ok=False)  # a silent endpoint: said in seconds
        quick = cfg.model_copy(
            update={
                "retry": RetryConfig(max_attempts=2, initial_wait=0.2, max_wait=1.0, jitter=0.1),
                "request_timeout": min(cfg.request_timeout, 30.0),
            }
        )
        kind = EmbeddingModel if cfg.type == "embedding" else ChatModel
        probe = kind(model_id, quick, cache=ResponseCache(None), limiter=models.limiter, ledger=models.ledger)
        started = time.perf_counter()
        try:
            if cfg.type == "embedding":
                await probe.embed(["ping"], stage="preflight")
            else:
                await probe.chat(
                    [{"role": "user", "content": "ping"}], stage="preflight", max_tokens=1, use_cache=False
                )
            lines.append(f"ok: {probe.client.where} answered in {1000 * (time.perf_counter() - started):.0f} ms")
        finally:
            await probe.aclose()
    return lines
