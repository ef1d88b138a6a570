"""Build a query engine for a method, and validate a query before any work."""

from __future__ import annotations

from pathlib import Path

from graphrag_ray.config.settings import Settings
from graphrag_ray.errors import GraphRagRayError
from graphrag_ray.llm.models import Models
from graphrag_ray.query.basic import BasicSearch
from graphrag_ray.query.drift import DriftSearch
from graphrag_ray.query.global_search import GlobalSearch
from graphrag_ray.query.hybrid import HybridSearch
from graphrag_ray.query.index_data import IndexData
from graphrag_ray.query.local import LocalSearch

ENGINES = {"local": LocalSearch, "global": GlobalSearch, "drift": DriftSearch, "basic": BasicSearch,
           "hybrid": HybridSearch}
QUERY_METHODS = (*ENGINES, "auto")


def check_query(query: str | None, method: str, data: IndexData, community_level: int) -> None:
    if not query or not query.strip():
        raise GraphRagRayError("empty query: give the question as an argument or with --query")
    if method not in QUERY_METHODS:
        raise GraphRagRayError(f"--method {method}: unknown method (have: {', '.join(QUERY_METHODS)})")
    if community_level > data.max_level and method in ("global", "hybrid", "auto"):
        raise GraphRagRayError(f"--community-level {community_level}: the index's deepest level is {data.max_level}")


def make_engine(method: str, data: IndexData, models: Models, settings: Settings, root: Path | None = None,
                response_type: str | None = None, community_level: int | None = None,
                dynamic_community_selection: bool = False, no_llm: bool = False):
    kwargs = dict(root=root, response_type=response_type, community_level=community_level, no_llm=no_llm)
    if method in ("global", "hybrid"):
        kwargs["dynamic_community_selection"] = dynamic_community_selection
    return ENGINES[method](data, models, settings, **kwargs)
