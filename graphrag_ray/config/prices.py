"""List prices of the common hosted models: what a model's calls are billed at when settings give no price
(`models.<id>.price`, which always wins). USD per 1M tokens, as the providers' pricing pages gave them
(`PRICES_AS_OF`; this table is data, not a promise):
- OpenAI: https://platform.openai.com/docs/pricing (Batch API: 50 % of the price; cached input as listed; Azure
  OpenAI's Global deployments bill the same per model, and are found here when the deployment is named after it)
- DeepSeek: https://api-docs.deepseek.com/quick_start/pricing (cache hit / miss; no Batch API)
- Mistral: https://mistral.ai/pricing (batch 50 %; no cached-input price)
- Google Gemini (its OpenAI-compatible endpoint): https://ai.google.dev/gemini-api/docs/pricing (implicit caching,
  batch 50 %)
"""

from __future__ import annotations

from dataclasses import dataclass

PRICES_AS_OF = "2025-10"


@dataclass(frozen=True)
class ListPrice:
    input: float
    output: float = 0.0
    cached_input: float | None = None  # None: the provider gives no discount for cached prompt tokens
    batch_discount: float | None = 0.5  # share of the price a Batch API call bills; None: no Batch API
    source: str = "openai"


# name -> list price; a model name is matched exactly, else by its longest listed prefix (`gpt-4o-mini-2024-07-18`)
LIST_PRICES: dict[str, ListPrice] = {
    # OpenAI
    "gpt-4o-mini": ListPrice(0.15, 0.60, 0.075),
    "gpt-4o": ListPrice(2.50, 10.00, 1.25),
    "gpt-4.1": ListPrice(2.00, 8.00, 0.50),
    "gpt-4.1-mini": ListPrice(0.40, 1.60, 0.10),
    "gpt-4.1-nano": ListPrice(0.10, 0.40, 0.025),
    "gpt-5": ListPrice(1.25, 10.00, 0.125),
    "gpt-5-mini": ListPrice(0.25, 2.00, 0.025),
    "gpt-5-nano": ListPrice(0.05, 0.40, 0.005),
    "o3": ListPrice(2.00, 8.00, 0.50),
    "o3-mini": ListPrice(1.10, 4.40, 0.55),
    "o4-mini": ListPrice(1.10, 4.40, 0.275),
    "text-embedding-3-small": ListPrice(0.02),
    "text-embedding-3-large": ListPrice(0.13),
    "text-embedding-ada-002": ListPrice(0.10),
    # DeepSeek (V3.2 behind both names)
    "deepseek-chat": ListPrice(0.28, 0.42, 0.028, None, "deepseek"),
    "deepseek-reasoner": ListPrice(0.28, 0.42, 0.028, None, "deepseek"),
    # Mistral
    "mistral-medium-latest": ListPrice(0.40, 2.00, None, 0.5, "mistral"),
    "mistral-small-latest": ListPrice(0.10, 0.30, None, 0.5, "mistral"),
    "mistral-embed": ListPrice(0.10, 0.0, None, 0.5, "mistral"),
    # Google Gemini
    "gemini-2.5-pro": ListPrice(1.25, 10.00, 0.125, 0.5, "gemini"),
    "gemini-2.5-flash": ListPrice(0.30, 2.50, 0.03, 0.5, "gemini"),
    "gemini-2.5-flash-lite": ListPrice(0.10, 0.40, 0.01, 0.5, "gemini"),
    "gemini-embedding-001": ListPrice(0.15, 0.0, None, 0.5, "gemini"),
}


def list_price(model: str) -> ListPrice | None:
    """The list price of `model` (exact name, else its longest listed prefix followed by `-`), or None."""
    name = model.lower().rsplit("/", 1)[-1]  # `openai/gpt-4o-mini` (a router's name) is gpt-4o-mini
    if name in LIST_PRICES:
        return LIST_PRICES[name]
    prefixes = [p for p in LIST_PRICES if name.startswith(p + "-")]
    return LIST_PRICES[max(prefixes, key=len)] if prefixes else None
