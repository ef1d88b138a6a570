"""The query methods, in one table, and the checks a question gets before anything is loaded (a light module: the
command line checks here before importing the engines, which the table names by dotted path).

A new method is one entry here and its engine's file: the command line's choices, `serve`'s model names, the
methods several indexes are asked with and the methods `eval` runs are views of this table.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from graphrag_ray.errors import QuestionTooLong, UsageError


@dataclass(frozen=True)
class MethodSpec:
    engine: str | None  # "module:Class" of its QueryEngine; None: "auto" routes to another, "evidence" has none
    settings_section: str | None  # the settings section it reads (local_search, ...)
    asked: bool = True  # a method of `query`, `chat` and the API
    served: bool = True  # a model name of `serve` (<index>/<method>)
    multi: bool = False  # several indexes at once (`query --root A --root B`, serve's `all/<method>`)
    evaluated: bool = True  # one of `eval --methods`


METHODS: dict[str, MethodSpec] = {
    "local": MethodSpec("graphrag_ray.query.local:LocalSearch", "local_search", multi=True),
    "global": MethodSpec("graphrag_ray.query.global_search:GlobalSearch", "global_search", multi=True),
    "drift": MethodSpec("graphrag_ray.query.drift:DriftSearch", "drift_search"),
    "basic": MethodSpec("graphrag_ray.query.basic:BasicSearch", "basic_search"),
    "hybrid": MethodSpec("graphrag_ray.query.hybrid:HybridSearch", "query"),  # query.hybrid_prompt, global's model
    "auto": MethodSpec(None, "query", evaluated=False),  # routed per question to one of the above (api/search.py)
    # eval only: local search's context with the extractive answer, no LLM - the baseline the others are judged by
    "evidence": MethodSpec(None, "local_search", asked=False, served=False),
}
METHOD_ALIASES = {"contextual": "auto"}  # the routed mode under the name the GraphRAG articles' mode table uses


def register_method(name: str, spec: MethodSpec) -> None:
    """Add a method (a plug-in's engine): it is then asked, served and evaluated as its spec says."""
    if name in METHODS or name in METHOD_ALIASES:
        raise ValueError(f"query method {name!r} exists already")
    METHODS[name] = spec


def query_methods() -> tuple[str, ...]:
    return tuple(name for name, spec in METHODS.items() if spec.asked)


def served_methods() -> tuple[str, ...]:
    return tuple(name for name, spec in METHODS.items() if spec.served)


def multi_methods() -> tuple[str, ...]:
    return tuple(name for name, spec in METHODS.items() if spec.multi)


def eval_methods() -> tuple[str, ...]:
    return tuple(name for name, spec in METHODS.items() if spec.evaluated)


def engine_class(method: str) -> type:
    """The QueryEngine class of a method with an engine (imported now: the table names it by path)."""
    module, _, name = METHODS[method].engine.partition(":")
    return getattr(importlib.import_module(module), name)


def check_method(
    query: str | None, method: str, community_level: int | None = None, max_chars: int | None = None
) -> str:
    """What can be checked before the index is loaded; returns the method's canonical name."""
    method = METHOD_ALIASES.get(method, method)
    if not query or not query.strip():
        raise UsageError("empty query: give the question as an argument, with --query, or --query-file")
    if max_chars is not None and len(query) > max_chars:
        raise QuestionTooLong(
            f"the question is {len(query):,} characters, over query.max_question_chars "
            f"({max_chars:,}): shorten it or raise the setting"
        )
    if method not in query_methods():
        raise UsageError(f"--method {method}: unknown method (have: {', '.join(query_methods())}, contextual)")
    if community_level is not None and community_level < 0:
        raise UsageError(f"--community-level {community_level}: a level is 0 (the root) or deeper")
    return method
