"""One question asked of several indexes at once.

Global search maps over every index's reports (each index's map calls where that index lives: this process, or
its own serve deployment) and reduces once. Local search builds each index's context and merges the tables by
score: a row's reciprocal rank in its own index, weighted by how many of the entities the question names that
index holds. Every id is cited as `<index>:<id>`, since each index numbers its rows from 0. The answer is made
with the first index's models and prompts.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

from graphrag_ray.errors import UsageError
from graphrag_ray.query.context.budget import pack_table
from graphrag_ray.query.context.history import ConversationHistory
from graphrag_ray.query.context.local_context import LocalContext
from graphrag_ray.query.engine import Prepared, QueryEngine
from graphrag_ray.query.global_search import GlobalSearch, MapPoints
from graphrag_ray.query.local import LocalSearch
from graphrag_ray.query.methods import multi_methods
from graphrag_ray.query.result import SearchResult

RRF_K = 60  # reciprocal-rank fusion's usual constant: the first rows of each index count about alike
# the local context's tables in packing order, each with its budget share (as build_local_context spends them)
LOCAL_TABLES = (
    ("history", "history"),
    ("reports", "reports"),
    ("entities", "local"),
    ("relationships", "local"),
    ("claims", "local"),
    ("sources", "sources"),
)


def index_name(root, settings) -> str:
    """An index's name where several are asked or served: serve.name, or its root folder's name."""
    from pathlib import Path

    return settings.serve.name or Path(root).resolve().name


class IndexPart(Protocol):
    """One index of a multi-index question: in this process (EnginePart) or behind a serve deployment."""

    name: str

    async def points(self, query: str) -> MapPoints: ...

    async def local_context(self, query: str, history: ConversationHistory | None) -> LocalContext: ...

    async def report_batches(self, query: str) -> SearchResult: ...


@dataclass
class EnginePart:
    """An index in this process: its global and local engines, labelled with its name."""

    name: str
    global_engine: GlobalSearch
    local_engine: LocalSearch

    def __post_init__(self):
        self.global_engine.label = self.local_engine.label = self.name

    async def points(self, query: str) -> MapPoints:
        return await self.global_engine.points(query)

    async def local_context(self, query: str, history: ConversationHistory | None) -> LocalContext:
        return labelled(self.name, await self.local_engine.build_context(query, history))

    async def report_batches(self, query: str) -> SearchResult:
        return await self.global_engine.context_only(query)


def labelled(name: str, context: LocalContext) -> LocalContext:
    """The context with every id (first column of each table but the history, `id` of each record) as
    `<name>:<id>`."""
    tables = {
        key: (title, columns, rows if key == "history" else [[f"{name}:{row[0]}", *row[1:]] for row in rows])
        for key, (title, columns, rows) in context.tables.items()
    }
    records = {
        key: rows if key == "history" else [{**r, "id": f"{name}:{r['id']}", "index": name} for r in rows]
        for key, rows in context.records.items()
    }
    return LocalContext(context.text, records, context.selected, tables, context.named)


def merge_local(
    contexts: list[LocalContext], budget: int, community_prop: float, text_unit_prop: float, count
) -> LocalContext:
    """One local context from several indexes' (already labelled): per table, rows by score (reciprocal rank in
    their own index x (1 + the named entities that index matched)), packed into the budget shares one index's
    context would have."""
    parts: list[str] = []
    records: dict[str, list[dict]] = {}
    tables: dict[str, tuple[str, list[str], list[list]]] = {}
    spent = {"history": 0, "reports": 0, "local": 0, "sources": 0}
    shares = {"history": budget // 4, "reports": int(budget * community_prop), "sources": int(budget * text_unit_prop)}
    for key, share in LOCAL_TABLES:
        if share == "local":
            shares["local"] = max(0, budget - spent["history"] - shares["reports"] - shares["sources"])
        scored = []
        for order, context in enumerate(contexts[:1] if key == "history" else contexts):
            if key not in context.tables:
                continue
            title, columns, rows = context.tables[key]
            for rank, (row, record) in enumerate(zip(rows, context.records.get(key, []))):
                scored.append(((1 + context.named) / (RRF_K + rank), order, rank, title, columns, row, record))
        if not scored:
            continue
        scored.sort(key=lambda s: (-s[0], s[1], s[2]))
        title, columns = scored[0][3], max((s[4] for s in scored), key=len)
        # one index's Sources may say where each unit is (`source`: PDF pages, headings) and another's not: every
        # row is laid out in the widest columns, a column its index lacks left empty
        scored = [(*s[:5], _in_columns(s[5], s[4], columns), s[6]) for s in scored]
        text, kept = pack_table(title, columns, [s[5] for s in scored], count, shares[share] - spent[share])
        if kept:
            parts.append(text)
            spent[share] += count(text)
            tables[key] = (title, columns, [s[5] for s in scored[:kept]])
            records[key] = [s[6] for s in scored[:kept]]
    selected = [e for context in contexts for e in context.selected]
    return LocalContext("\n".join(parts), records, selected, tables, sum(c.named for c in contexts))


def _in_columns(row: list, columns: list[str], wanted: list[str]) -> list:
    """A table row laid out in `wanted` columns (a column it lacks: empty)."""
    if columns == wanted:
        return row
    cells = dict(zip(columns, row))
    return [cells.get(column, "") for column in wanted]


class MultiIndexSearch(QueryEngine):
    """Global or local search over several indexes; the first part's engine makes the answer."""

    def __init__(self, method: str, parts: list[IndexPart], answerer: QueryEngine):
        if method not in multi_methods():
            raise UsageError(
                f"--method {method}: several indexes are asked with {' or '.join(sorted(multi_methods()))} search"
            )
        names = [part.name for part in parts]
        if len(set(names)) != len(names):
            raise UsageError(
                f"two indexes are both named {next(n for n in names if names.count(n) > 1)!r}: give "
                "each its own serve.name (or root folder name)"
            )
        self.method, self.parts, self.answerer = method, parts, answerer
        self.chat_model_key = answerer.chat_model_key
        super().__init__(
            answerer.data,
            answerer.models,
            answerer.settings,
            answerer.root,
            answerer.response_type,
            answerer.community_level,
            answerer.no_llm,
        )

    async def prepare(self, query: str, history: ConversationHistory | None) -> Prepared:
        if self.method == "global":
            found = await asyncio.gather(*(part.points(query) for part in self.parts))
            prepared = self.answerer.answer_from(query, list(found))
        else:
            prepared = await self._local(query, history)
        prepared.result.method = self.method
        prepared.result.details["indexes"] = [part.name for part in self.parts]
        return prepared

    async def _local(self, query: str, history: ConversationHistory | None) -> Prepared:
        contexts = await asyncio.gather(*(part.local_context(query, history) for part in self.parts))
        cfg = self.answerer.cfg
        count = self.chat(cfg.chat_model_id).tokenizer.count
        context = merge_local(
            list(contexts),
            self.answerer.max_context_tokens or cfg.max_context_tokens,
            cfg.community_prop,
            cfg.text_unit_prop,
            count,
        )
        return self.answerer.answer_request(context, query)

    async def context_only(self, query: str, conversation_history: ConversationHistory | None = None) -> SearchResult:
        if self.method == "global":  # the reports every index would map over (no map call)
            results = await asyncio.gather(*(part.report_batches(query) for part in self.parts))
            text = "\n\n".join(f"=== index {part.name} ===\n{r.context_text}" for part, r in zip(self.parts, results))
            reports = [record for r in results for record in r.context_data.get("reports", [])]
            return SearchResult(
                "",
                {"reports": reports},
                text,
                method=self.method,
                details={"indexes": [part.name for part in self.parts]},
            )
        return await super().context_only(query, conversation_history)
