"""What a job spends, as Ray metrics (`ray.util.metrics`): exported by each node's metrics agent in Prometheus'
format and drawn by the Ray dashboard's Grafana panels (names prefixed `ray_graphrag_ray_`, counters `_total`).
Recorded where it happens - the worker that paid a call, the driver that finished a partition, the replica that
answered a question - and only in a process Ray runs (in a process with no Ray, nothing is made or sent).

    graphrag_ray_llm_calls, _prompt_tokens, _cached_tokens, _completion_tokens, _cost_usd   {stage, model}
    graphrag_ray_llm_events (cache_hits, retries, rate_limited, failures, unusable, ...)  {stage, model, event}
    graphrag_ray_items_done, graphrag_ray_items_total                                        {step}
    graphrag_ray_serve_requests, _serve_latency_s, _serve_llm_calls, _serve_cost_usd          {index, method}
"""

from __future__ import annotations

import functools
from typing import Any


def _ray_on() -> bool:
    try:
        import ray
    except ImportError:  # pragma: no cover - ray is a dependency
        return False
    return ray.is_initialized()


@functools.cache
def _metric(kind: str, name: str, tags: tuple[str, ...], description: str) -> Any:
    from ray.util import metrics

    cls = {"counter": metrics.Counter, "gauge": metrics.Gauge, "histogram": metrics.Histogram}[kind]
    if kind == "histogram":
        return cls(name, description=description, boundaries=[0.1, 0.5, 1, 2, 5, 10, 30, 60, 120], tag_keys=tags)
    return cls(name, description=description, tag_keys=tags)


def count(name: str, value: float, description: str = "", **tags: str) -> None:
    """Add `value` to counter `name` (with these tags), when Ray runs this process."""
    if value and _ray_on():
        _metric("counter", name, tuple(sorted(tags)), description).inc(value, tags=tags)


def gauge(name: str, value: float, description: str = "", **tags: str) -> None:
    if _ray_on():
        _metric("gauge", name, tuple(sorted(tags)), description).set(value, tags=tags)


def observe(name: str, value: float, description: str = "", **tags: str) -> None:
    if _ray_on():
        _metric("histogram", name, tuple(sorted(tags)), description).observe(value, tags=tags)


def paid_call(stage: str, model: str, prompt: int, cached: int, completion: int, cost: float) -> None:
    count("graphrag_ray_llm_calls", 1, "LLM calls paid", stage=stage, model=model)
    count("graphrag_ray_prompt_tokens", prompt, "prompt tokens paid", stage=stage, model=model)
    count("graphrag_ray_cached_tokens", cached, "prompt tokens the provider's cache served", stage=stage, model=model)
    count("graphrag_ray_completion_tokens", completion, "completion tokens paid", stage=stage, model=model)
    count("graphrag_ray_cost_usd", cost, "USD at the configured prices", stage=stage, model=model)


def events(stage: str, model: str, counts: dict[str, int]) -> None:
    for event, value in counts.items():
        count(
            "graphrag_ray_llm_events",
            value,
            "cache hits, retries, 429s, failures...",
            stage=stage,
            model=model,
            event=event,
        )
