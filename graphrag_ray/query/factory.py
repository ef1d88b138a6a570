"""Build a query engine for a method; the community level a query uses."""

from __future__ import annotations

import logging
from pathlib import Path

from graphrag_ray.config.settings import Settings
from graphrag_ray.llm.models import Models
from graphrag_ray.query.index_data import IndexData
from graphrag_ray.query.methods import engine_class

log = logging.getLogger(__name__)


def effective_level(requested: int, data: IndexData, asked: bool = False) -> int:
    """One rule for every method (and the view): a level deeper than the index's deepest uses the deepest - said
    as a warning when the user `asked` for that level, on the log when it is the settings' default."""
    if requested > data.max_level:
        log.log(
            logging.WARNING if asked else logging.INFO,
            "community level %d is deeper than the index's deepest level (%d): using %d",
            requested,
            data.max_level,
            data.max_level,
        )
    return min(requested, data.max_level)


def make_engine(
    method: str,
    data: IndexData,
    models: Models,
    settings: Settings,
    root: Path | None = None,
    response_type: str | None = None,
    community_level: int | None = None,
    dynamic_community_selection: bool = False,
    no_llm: bool = False,
):
    kwargs = dict(root=root, response_type=response_type, community_level=community_level, no_llm=no_llm)
    if method in ("global", "hybrid"):
        kwargs["dynamic_community_selection"] = dynamic_community_selection
    return engine_class(method)(data, models, settings, **kwargs)


async def engine_for(
    query: str,
    method: str,
    index: IndexData,
    models: Models,
    settings: Settings,
    root: Path | None,
    community_level: int | None = None,
    dynamic_community_selection: bool = False,
    response_type: str | None = None,
    no_llm: bool = False,
):
    """The engine answering `query` with a checked `method` over a loaded index, `auto` routed first:
    (engine, details to add to its result)."""
    from graphrag_ray.query.router import route

    level = effective_level(
        settings.query.community_level if community_level is None else community_level,
        index,
        asked=community_level is not None,
    )
    no_llm = no_llm or not models.has_chat(settings.global_search.chat_model_id)
    details = {}
    chosen = method
    if method == "auto":
        chosen, why = await route(query, index, models, settings, root, use_llm=not no_llm)
        details = {"route": chosen, "route_reason": why}
    engine = make_engine(
        chosen, index, models, settings, root, response_type, level, dynamic_community_selection, no_llm
    )
    return engine, details
