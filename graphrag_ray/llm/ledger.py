"""Usage ledger: what every stage spent, per model. Each process keeps its own; the driver merges them."""

from __future__ import annotations

import json
import os
from contextvars import ContextVar
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

from graphrag_ray.llm import metrics

if TYPE_CHECKING:
    from graphrag_ray.llm.prices import Price


@dataclass
class Usage:
    calls: int = 0  # responses paid for, usable or not
    prompt_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens: served from the provider's prompt cache, billed at its price
    completion_tokens: int = 0  # reasoning included, as providers bill it
    reasoning_tokens: int = 0  # of completion_tokens: the reasoning of reasoning models
    cache_hits: int = 0  # answers served from the cache (free)
    retries: int = 0
    rate_limited: int = 0  # 429s received
    failures: int = 0  # requests that failed after the whole retry budget
    unusable: int = 0  # paid responses that could not be used (invalid JSON, an incomplete answer)
    counted_here: int = 0  # paid responses whose server reported no usage: their tokens were counted here
    abandoned: int = 0  # requests given up on after sending (timed out, stalled): maybe generated and
    #                             billed by the provider, with tokens no one saw (not in the figures above)
    cut_streams: int = 0  # streams the server ended with no finish_reason (cut short, not finished): asked again
    batch_calls: int = 0  # of calls: answered by the provider's Batch API (billed at its discount)
    unpriced_calls: int = 0  # of calls: of a model whose price nobody knows (their cost shows as $0)
    cost: float = 0.0  # USD from the configured prices

    def add(self, other: Usage) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


class UsageLedger:
    def __init__(self):
        self.entries: dict[tuple[str, str], Usage] = {}

    def usage(self, stage: str, model: str) -> Usage:
        return self.entries.setdefault((stage, model), Usage())

    def record_call(
        self,
        stage: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        price: Price,
        reasoning_tokens: int = 0,
        cached_tokens: int = 0,
        batch: bool = False,
    ) -> None:
        u = self.usage(stage, model)
        u.calls += 1
        u.batch_calls += int(batch)
        u.unpriced_calls += int(not price.known)
        u.prompt_tokens += prompt_tokens
        u.cached_tokens += min(cached_tokens, prompt_tokens)
        u.completion_tokens += completion_tokens
        u.reasoning_tokens += reasoning_tokens
        u.cost += price.cost(prompt_tokens, completion_tokens, cached_tokens, batch)

    def record(self, stage: str, model: str, **counts: int) -> None:
        u = self.usage(stage, model)
        for name, value in counts.items():
            setattr(u, name, getattr(u, name) + value)

    def merge(self, other: UsageLedger | dict) -> None:
        other_entries = other.entries if isinstance(other, UsageLedger) else UsageLedger.from_dict(other).entries
        for key, usage in other_entries.items():
            self.usage(*key).add(usage)

    def total(self, stage: str | None = None) -> Usage:
        out = Usage()
        for (s, _), usage in self.entries.items():
            if stage is None or s == stage:
                out.add(usage)
        return out

    def unpriced_lines(self) -> list[str]:
        """One line per model whose calls were priced at $0 because nobody knows its price."""
        models = sorted({model for (_, model), usage in self.entries.items() if usage.unpriced_calls})
        return [
            f"price of model {model!r} unknown: costs shown as $0 - set its price in settings "
            "(models.<id>.price: input_per_1m, output_per_1m)"
            for model in models
        ]

    def to_dict(self) -> dict:
        stages: dict[str, dict] = {}
        for (stage, model), usage in sorted(self.entries.items()):
            stages.setdefault(stage, {})[model] = asdict(usage)
        return {"stages": stages, "total": asdict(self.total())}

    @classmethod
    def from_dict(cls, data: dict) -> UsageLedger:
        ledger = cls()
        for stage, models in data.get("stages", {}).items():
            for model, usage in models.items():
                ledger.entries[(stage, model)] = Usage(**usage)
        return ledger

    def write_json(self, path: str | Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=2), encoding="utf-8")
        tmp.replace(path)

    def rich_table(self, title: str = "LLM usage"):
        from rich.table import Table

        table = Table(title=title)
        for col in (
            "stage",
            "model",
            "calls",
            "prompt tok",
            "cached tok",
            "completion tok",
            "cache hits",
            "retries",
            "429s",
            "unusable",
            "failures",
            "cost $",
        ):
            table.add_column(col, justify="left" if col in ("stage", "model") else "right")
        rows = sorted(self.entries.items()) + [(("total", ""), self.total())]
        for (stage, model), u in rows:
            table.add_row(
                stage,
                model,
                f"{u.calls:,}",
                f"{u.prompt_tokens:,}",
                f"{u.cached_tokens:,}",
                f"{u.completion_tokens:,}",
                f"{u.cache_hits:,}",
                f"{u.retries:,}",
                f"{u.rate_limited:,}",
                f"{u.unusable:,}",
                f"{u.failures:,}",
                f"{u.cost:.4f}",
            )
        notes = []
        if reasoning := self.total().reasoning_tokens:
            notes.append(f"{reasoning:,} of the completion tokens were reasoning (billed as output)")
        if counted := self.total().counted_here:
            notes.append(
                f"{counted:,} answers came with no usage from the server: their tokens were counted "
                "here with the model's tokenizer"
            )
        if abandoned := self.total().abandoned:
            notes.append(
                f"{abandoned:,} requests were given up on after sending (timed out or stalled): the "
                "provider may have generated and billed their answers, whose tokens are not counted above"
            )
        if cached := self.total().cached_tokens:
            notes.append(f"{cached:,} of the prompt tokens were served from the provider's prompt cache (its price)")
        if batch := self.total().batch_calls:
            notes.append(f"{batch:,} calls were answered by the Batch API (billed at its discount)")
        notes += self.unpriced_lines()
        if notes:
            table.caption = "\n".join(notes)
        return table


_ACTIVE: ContextVar[UsageLedger | None] = ContextVar("graphrag_ray_active_ledger", default=None)


def active_ledger(default: UsageLedger) -> UsageLedger:
    """The ledger of the unit of work running in this async context (a partition), else `default`."""
    return _ACTIVE.get() or default


class recording_into:
    """`with recording_into(ledger):` - calls made in this context (and tasks it starts) are recorded there,
    so concurrent partitions on one worker each get exactly their own usage."""

    def __init__(self, ledger: UsageLedger, roll_up: bool = True):
        self.ledger = ledger
        self.roll_up = roll_up  # False: the caller merges this ledger itself (a worker returns its usage)

    def __enter__(self) -> UsageLedger:
        self._outer = _ACTIVE.get()
        self._token = _ACTIVE.set(self.ledger)
        return self.ledger

    def __exit__(self, *exc) -> None:
        try:
            _ACTIVE.reset(self._token)
        except ValueError:  # left in another context: a stream its reader left early, closed by the event loop
            pass
        # nested recordings roll up (a hybrid search holds a local and a global one)
        if self._outer is not None and self.roll_up:
            self._outer.merge(self.ledger)


class PaidJournal:
    """Everything one process's models recorded for one run, on disk as it happens: a run's ledger is the sum of
    its journals, across every attempt - resumed, retried, interrupted or killed - so a later attempt never hides
    what an earlier one paid (`run_ledger`). Each process (and each copy sent to a Ray worker) appends to a file of
    its own, a line per paid call (storage's AppendFile: a kill loses at most the line being written, which the
    reader skips); cache hits are summed and written with the next line or at a partition's end (`flush`)."""

    def __init__(self, location: str):
        import socket
        import threading
        import uuid

        from graphrag_ray.storage.kv import AppendFile

        self.location = location
        self.file = AppendFile(location, f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl")
        self.lock = threading.Lock()
        self.pending_hits: dict[tuple[str, str], int] = {}

    def record_call(
        self,
        stage: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        price: Price,
        reasoning_tokens: int = 0,
        cached_tokens: int = 0,
        batch: bool = False,
    ) -> None:
        self._append(
            {
                "stage": stage,
                "model": model,
                "call": [prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens, int(batch)],
                "price": [price.input, price.cached_input, price.output, price.batch_discount, price.known],
            }
        )

    def record(self, stage: str, model: str, **counts: int) -> None:
        counts = {k: v for k, v in counts.items() if v}
        if not counts:
            return
        if set(counts) == {"cache_hits"}:
            with self.lock:
                key = (stage, model)
                self.pending_hits[key] = self.pending_hits.get(key, 0) + counts["cache_hits"]
            return
        self._append({"stage": stage, "model": model, "counts": counts})

    def flush(self) -> None:
        self._append(None)

    def _append(self, entry: dict | None) -> None:
        with self.lock:
            entries = [{"stage": s, "model": m, "counts": {"cache_hits": n}} for (s, m), n in self.pending_hits.items()]
            self.pending_hits.clear()
            if entry is not None:
                entries.append(entry)
            if entries:
                self.file.append(
                    "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries).encode(), force=entry is None
                )

    def __reduce__(self):  # another process journals into a file of its own
        return (PaidJournal, (self.location,))


def run_ledger(location: str) -> UsageLedger:
    """The sum of every journal of a run (PaidJournal); a line a kill cut short is skipped."""
    from graphrag_ray.storage.kv import read_lines

    total = UsageLedger()
    for line in read_lines(location, "*.jsonl"):
        try:
            entry = json.loads(line)
            if "call" in entry:
                total.record_call(entry["stage"], entry["model"], *_journalled_call(entry))
            else:
                total.record(entry["stage"], entry["model"], **entry["counts"])
        except (ValueError, TypeError, KeyError):
            continue
    return total


def _journalled_call(entry: dict) -> tuple:
    """(prompt, completion, price, reasoning, cached, batch) of a journal's call line; a line of an older version
    (`call`: prompt, completion, input price, output price, reasoning) reads as it was priced then."""
    from graphrag_ray.llm.prices import Price

    call = entry["call"]
    if "price" not in entry:
        prompt, completion, price_in, price_out, reasoning = call
        return prompt, completion, Price(price_in, price_in, price_out, 1.0, True, "journal"), reasoning, 0, False
    prompt, completion, reasoning, cached, batch = call
    return prompt, completion, Price(*entry["price"], "journal"), reasoning, cached, bool(batch)


class Recording:
    """Where a model's records go: the ledger of the work in this context, and the run's journal if any."""

    def __init__(self, ledger: UsageLedger, journal: PaidJournal | None):
        self.ledger, self.journal = ledger, journal

    def record_call(
        self,
        stage: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        price: Price,
        reasoning_tokens: int = 0,
        cached_tokens: int = 0,
        batch: bool = False,
    ) -> None:
        args = (stage, model, prompt_tokens, completion_tokens, price, reasoning_tokens, cached_tokens, batch)
        self.ledger.record_call(*args)
        if self.journal is not None:
            self.journal.record_call(*args)
        metrics.paid_call(
            stage,
            model,
            prompt_tokens,
            cached_tokens,
            completion_tokens,
            price.cost(prompt_tokens, completion_tokens, cached_tokens, batch),
        )

    def record(self, stage: str, model: str, **counts: int) -> None:
        self.ledger.record(stage, model, **counts)
        if self.journal is not None:
            self.journal.record(stage, model, **counts)
        metrics.events(stage, model, counts)
