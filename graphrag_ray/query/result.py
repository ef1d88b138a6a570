"""What every query method returns, and the accounting that fills it (time, calls, tokens, cost)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from graphrag_ray.llm.ledger import UsageLedger, recording_into


@dataclass
class SearchResult:
    response: str
    context_data: dict[str, Any] = field(default_factory=dict)  # records used, per table (list of dicts)
    context_text: str = ""
    completion_time: float = 0.0
    llm_calls: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    method: str = ""
    details: dict[str, Any] = field(default_factory=dict)  # method-specific (map calls, route, ...)

    def usage_line(self) -> str:
        """Paid calls and answers taken from the cache apart: a cached answer costs no tokens."""
        paid = self.details.get("paid_calls", self.llm_calls)
        cached = self.llm_calls - paid
        calls = f"{paid} LLM call{'s' if paid != 1 else ''}" + (f" + {cached} from the cache" if cached else "")
        line = (
            f"[{self.method}] {self.completion_time:.2f}s, {calls}, {self.prompt_tokens:,} "
            f"prompt + {self.output_tokens:,} output tokens, ${self.cost:.5f}"
        )
        if cached_tokens := self.details.get("cached_tokens"):
            line = line.replace(" prompt + ", f" prompt ({cached_tokens:,} cached) + ", 1)
        if unusable := self.details.get("map_unparsed"):
            line += f"; {unusable} of {self.details.get('map_calls', unusable)} map answers unusable (-v: a sample)"
        for unpriced in self.details.get("unpriced", []):
            line += f"\n{unpriced}"
        return line


class Accounting:
    """`with Accounting() as acc: ...; acc.fill(result)` - usage recorded in this async context and below."""

    def __init__(self):
        self.ledger = UsageLedger()
        self._ctx = recording_into(self.ledger)

    def __enter__(self) -> Accounting:
        self.started = time.perf_counter()
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._ctx.__exit__(*exc)
        self.elapsed = time.perf_counter() - self.started

    def fill(self, result: SearchResult) -> SearchResult:
        total = self.ledger.total()
        result.completion_time = getattr(self, "elapsed", time.perf_counter() - self.started)
        result.llm_calls = total.calls + total.cache_hits
        result.prompt_tokens, result.output_tokens, result.cost = (
            total.prompt_tokens,
            total.completion_tokens,
            total.cost,
        )
        result.details.setdefault("paid_calls", total.calls)
        if total.cached_tokens:
            result.details["cached_tokens"] = total.cached_tokens
        if unpriced := self.ledger.unpriced_lines():
            result.details["unpriced"] = unpriced
        return result
