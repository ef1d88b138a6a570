"""What a provider bills: the price a model's calls are recorded at (settings, else the list price in
config/prices.py), and the usage fields in which providers say how much of a prompt they served from their prompt
cache."""

from __future__ import annotations

from dataclasses import dataclass

from graphrag_ray.config.prices import PRICES_AS_OF, list_price


@dataclass(frozen=True)
class Price:
    """USD per 1M tokens a model's calls are recorded at; `known` False: nobody said (the costs shown are $0)."""

    input: float
    cached_input: float
    output: float
    batch_discount: float
    known: bool
    source: str  # "settings", "list price (<provider>, <date>)", "computed here" or "unknown"

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0, batch: bool = False) -> float:
        """USD for one call: cached prompt tokens at the cached price, the rest at the input price, a Batch API
        call at the batch discount on both (OpenAI lists cached-input prices for its Batch tier too)."""
        cached = min(cached_tokens, prompt_tokens)
        dollars = (
            (prompt_tokens - cached) * self.input + cached * self.cached_input + completion_tokens * self.output
        ) / 1e6
        return dollars * (self.batch_discount if batch else 1.0)


def price_of(config) -> Price:
    """The price `config` (a ModelConfig) is billed at: what its settings say, else the list price of its model
    name; local embeddings cost nothing; otherwise unknown (0, and `known` False: a server of your own - llama.cpp,
    Ollama - is priced 0 by setting its price to 0, and is then no longer said to be unpriced)."""
    given, listed = config.price, list_price(config.model)
    if given.input_per_1m is not None or given.output_per_1m is not None:
        source, prompt, output, cached = "settings", given.input_per_1m or 0.0, given.output_per_1m or 0.0, None
    elif listed is not None:
        source, prompt, output = f"list price ({listed.source}, {PRICES_AS_OF})", listed.input, listed.output
        cached = listed.cached_input
    elif config.type == "local_embedding":
        source, prompt, output, cached = "computed here", 0.0, 0.0, None
    else:
        return Price(0.0, 0.0, 0.0, 1.0, False, "unknown")
    if given.cached_input_per_1m is not None:
        cached = given.cached_input_per_1m
    if given.batch_discount is not None:
        discount = given.batch_discount
    else:
        discount = listed.batch_discount if listed is not None and listed.batch_discount is not None else 0.5
    return Price(prompt, prompt if cached is None else cached, output, discount, True, source)


def unknown_price_lines(settings, model_ids) -> list[str]:
    """One line per model (of `model_ids`) whose price nobody knows: its costs show as $0 until it is set."""
    return [
        f"price of model {model_id!r} ({settings.models[model_id].model}) unknown: costs shown as $0 - set "
        f"models.{model_id}.price"
        for model_id in dict.fromkeys(model_ids)
        if model_id in settings.models and not price_of(settings.models[model_id]).known
    ]


def cached_tokens_of(usage: dict) -> int:
    """Prompt tokens a response's usage says the provider served from its prompt cache: OpenAI, Azure, Gemini's
    OpenAI-compatible endpoint, vLLM and xAI (`prompt_tokens_details.cached_tokens`), DeepSeek
    (`prompt_cache_hit_tokens`), Moonshot (`cached_tokens`), Anthropic's form (`cache_read_input_tokens`)."""
    details = usage.get("prompt_tokens_details") or {}
    found = (
        details.get("cached_tokens")
        or usage.get("prompt_cache_hit_tokens")
        or usage.get("cached_tokens")
        or usage.get("cache_read_input_tokens")
        or 0
    )
    try:
        return max(0, int(found))
    except (TypeError, ValueError):
        return 0
