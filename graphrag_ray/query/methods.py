"""The query methods' names and the checks a question gets before anything is loaded (a light module: the
command line checks here before importing the engines)."""

from __future__ import annotations

from graphrag_ray.errors import QuestionTooLong, UsageError

QUERY_METHODS = ("local", "global", "drift", "basic", "hybrid", "auto")
METHOD_ALIASES = {"contextual": "auto"}  # the routed mode under the name the GraphRAG articles' mode table uses


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
    if method not in QUERY_METHODS:
        raise UsageError(f"--method {method}: unknown method (have: {', '.join(QUERY_METHODS)}, contextual)")
    if community_level is not None and community_level < 0:
        raise UsageError(f"--community-level {community_level}: a level is 0 (the root) or deeper")
    return method
