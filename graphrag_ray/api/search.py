"""Asking an index: open it, every query method (one call, streamed, or over given tables as Microsoft
GraphRAG's API takes them) and the chat loop; several indexes behind one question."""

from __future__ import annotations

import contextlib
from pathlib import Path

from graphrag_ray.config.load import load_settings
from graphrag_ray.config.settings import Settings
from graphrag_ray.errors import UsageError
from graphrag_ray.llm.deadline import question_deadline
from graphrag_ray.llm.models import Models
from graphrag_ray.storage.location import as_location, resolve
from graphrag_ray.storage.tables import current_index


def open_index(
    root: str | Path = ".",
    config_file: str | Path | None = None,
    data: str | Path | None = None,
    settings: Settings | None = None,
    vectors: bool = True,
):
    """(settings, IndexData, models) for queries against ROOT/output (or `data`); `vectors=False` leaves the
    LanceDB tables closed (global search needs none, and opening them costs lancedb's import)."""
    from graphrag_ray.llm.tokens import load_in_background
    from graphrag_ray.query.index_data import IndexData

    settings = settings or load_settings(root, config_file)
    for model_id in {settings.local_search.chat_model_id, settings.global_search.chat_model_id}:
        if model_id in settings.models:  # every context budget counts with it: it builds while the tables load
            load_in_background(settings.models[model_id].model, settings.models[model_id].encoding)
    folder = as_location(data) if data else resolve(root, settings.output.base_dir)
    search = {"nprobes": settings.embed_text.nprobes, "refine_factor": settings.embed_text.refine_factor}
    return (
        settings,
        IndexData.load(folder, open_vectors=vectors, vector_search=search, given=bool(data)),
        Models.create(settings, root, check_first=True),
    )


def check_question(query: str | None, method: str, community_level: int | None = None) -> str:
    """What can be said about a question before the index is loaded (empty, unknown method, negative level);
    returns the method's canonical name (`contextual` is `auto`)."""
    from graphrag_ray.query.methods import check_method

    return check_method(query, method, community_level)


async def _multi_engine(
    query: str,
    method: str,
    roots: list,
    community_level,
    dynamic_community_selection,
    response_type,
    no_llm,
    opened: list[Models],
    overrides: dict | None = None,
):
    """Several indexes asked at once (query/multi.py): each opened with its own settings, all sharing the first
    one's rate limiter; the first one's models make the answer. Each root's Models is added to `opened`."""
    from graphrag_ray.query.factory import effective_level, make_engine
    from graphrag_ray.query.methods import check_method
    from graphrag_ray.query.multi import EnginePart, MultiIndexSearch, index_name

    parts, limiter = [], None
    for root in roots:
        settings = load_settings(root, overrides=overrides)
        method = check_method(query, method, community_level, settings.query.max_question_chars)
        settings, index, models = open_index(root, settings=settings, vectors=method != "global")
        if limiter is None:
            limiter = models.limiter
        models = Models.create(settings, root, limiter=limiter, check_first=True)
        opened.append(models)
        level = effective_level(
            settings.query.community_level if community_level is None else community_level,
            index,
            asked=community_level is not None,
        )
        engines = [
            make_engine(
                m, index, models, settings, Path(root), response_type, level, dynamic_community_selection, no_llm
            )
            for m in ("global", "local")
        ]
        parts.append(EnginePart(index_name(root, settings), *engines))
    answerer = parts[0].global_engine if method == "global" else parts[0].local_engine
    return MultiIndexSearch(method, parts, answerer), {}


async def _engine(asked: dict, opened: list[Models]):
    """Open the index, check the query, route `auto`, build the engine: (engine, details to add); the Models it
    made are added to `opened` (the caller closes them). `asked`: the arguments search() or search_streaming()
    was called with. `root` a list of several roots: one question asked of each (global or local search)."""
    from graphrag_ray.query.factory import engine_for
    from graphrag_ray.query.methods import check_method

    query, method, root, config_file, data, settings = (
        asked[k] for k in ("query", "method", "root", "config_file", "data", "settings")
    )
    community_level, dynamic_community_selection, response_type, no_llm = (
        asked[k] for k in ("community_level", "dynamic_community_selection", "response_type", "no_llm")
    )

    if isinstance(root, (list, tuple)):
        if len(root) > 1:
            if data is not None or config_file is not None:
                raise UsageError(
                    "--data and --config name one index: with several --root, each root's own "
                    "settings.yaml and published index are used"
                )
            return await _multi_engine(
                query,
                method,
                list(root),
                community_level,
                dynamic_community_selection,
                response_type,
                no_llm,
                opened,
                asked.get("overrides"),
            )
        root = root[0]
    settings = settings or load_settings(root, config_file, asked.get("overrides"))
    method = check_method(query, method, community_level, settings.query.max_question_chars)
    settings, index, models = open_index(root, config_file, data, settings, vectors=method != "global")
    opened.append(models)
    return await engine_for(
        query,
        method,
        index,
        models,
        settings,
        Path(root),
        community_level,
        dynamic_community_selection,
        response_type,
        no_llm,
    )


def _deadline_s(asked: dict) -> float:
    """The question's query.deadline_s (its settings are loaded here once, and handed on to the engine)."""
    root = asked["root"]
    overrides = asked.get("overrides")
    if isinstance(root, (list, tuple)) and len(root) > 1:
        return load_settings(root[0], overrides=overrides).query.deadline_s
    if asked["settings"] is None:
        one = root[0] if isinstance(root, (list, tuple)) else root
        asked["settings"] = load_settings(one, asked["config_file"], overrides)
    return asked["settings"].query.deadline_s


@contextlib.asynccontextmanager
async def _closing(*models: Models):
    """Around a public async API call: the Models it made (given, or added to the list it yields) close their
    SDK clients before it returns - a user's own asyncio.run would otherwise end with "Unclosed client session"
    blocks; the next call opens new ones."""
    opened = list(models)
    try:
        yield opened
    finally:
        for each in opened:
            await each.aclose()


async def search(
    query: str,
    method: str = "local",
    root: str | Path = ".",
    config_file: str | Path | None = None,
    data: str | Path | None = None,
    community_level: int | None = None,
    dynamic_community_selection: bool = False,
    response_type: str | None = None,
    conversation_history=None,
    context_only: bool = False,
    settings: Settings | None = None,
    no_llm: bool = False,
    overrides: dict | None = None,
):
    """Any method, `auto` included; returns a SearchResult (its details say the route taken). `overrides`:
    settings merged over each root's file (the command line's --no-cache)."""
    asked = dict(locals())
    async with _closing() as opened, question_deadline(_deadline_s(asked)):
        engine, details = await _engine(asked, opened)  # `auto` asks the model to route: within the deadline
        result = await (
            engine.context_only(query, conversation_history)
            if context_only
            else engine.search(query, conversation_history)
        )
    result.details.update(details)
    return result


async def search_streaming(
    query: str,
    method: str = "local",
    root: str | Path = ".",
    config_file: str | Path | None = None,
    data: str | Path | None = None,
    community_level: int | None = None,
    dynamic_community_selection: bool = False,
    response_type: str | None = None,
    conversation_history=None,
    settings: Settings | None = None,
    no_llm: bool = False,
    on_result=None,
    overrides: dict | None = None,
):
    """Yield the answer's pieces as they arrive, for any method (`auto` routes first); `on_result(SearchResult)`
    is called at the end with the whole result."""
    asked = dict(locals())
    async with _closing() as opened, question_deadline(_deadline_s(asked)):
        engine, details = await _engine(asked, opened)
        async with contextlib.aclosing(engine.stream_search(query, conversation_history)) as chunks:
            async for chunk in chunks:  # left early: the stream is closed here, before the clients are
                yield chunk
    engine.last_result.details.update(details)
    if on_result is not None:
        on_result(engine.last_result)


def local_search_streaming(query: str, root: str | Path = ".", **kwargs):
    return search_streaming(query, "local", root, **kwargs)


def global_search_streaming(query: str, root: str | Path = ".", **kwargs):
    return search_streaming(query, "global", root, **kwargs)


def drift_search_streaming(query: str, root: str | Path = ".", **kwargs):
    return search_streaming(query, "drift", root, **kwargs)


def basic_search_streaming(query: str, root: str | Path = ".", **kwargs):
    return search_streaming(query, "basic", root, **kwargs)


_FRAMES = ("entities", "communities", "community_reports", "text_units", "relationships", "covariates")


async def _frames_search(method: str, given: dict, history=None, dynamic: bool = False):
    """Microsoft GraphRAG's query API: an engine over the tables `given` holds (a function's own arguments, its
    frames among them), asked once; (response, context_data)."""
    from graphrag_ray.query.factory import make_engine
    from graphrag_ray.query.index_data import IndexData

    root, frames = given["root"], {name: given[name] for name in _FRAMES if name in given}
    settings = given["config"] or load_settings(root)
    published = current_index(resolve(root, settings.output.base_dir)) if root else None
    index = IndexData.from_frames(vectors_dir=published.child("lancedb") if published else None, **frames)
    models = Models.create(settings, root, check_first=True)
    engine = make_engine(
        method,
        index,
        models,
        settings,
        Path(root) if root else None,
        given["response_type"],
        given.get("community_level"),
        dynamic,
    )
    async with _closing(models):
        result = await engine.search(given["query"], history)
    return result.response, result.context_data


async def local_search(
    config=None,
    entities=None,
    communities=None,
    community_reports=None,
    text_units=None,
    relationships=None,
    covariates=None,
    community_level: int = 2,
    response_type: str = "Multiple Paragraphs",
    query: str = "",
    conversation_history=None,
    root: str | Path | None = None,
):
    """Microsoft GraphRAG's signature: returns (response, context_data)."""
    return await _frames_search("local", locals(), conversation_history)


async def global_search(
    config=None,
    entities=None,
    communities=None,
    community_reports=None,
    community_level: int | None = 2,
    dynamic_community_selection: bool = False,
    response_type: str = "Multiple Paragraphs",
    query: str = "",
    root: str | Path | None = None,
):
    return await _frames_search("global", locals(), dynamic=dynamic_community_selection)


async def drift_search(
    config=None,
    entities=None,
    communities=None,
    community_reports=None,
    text_units=None,
    relationships=None,
    community_level: int = 2,
    response_type: str = "Multiple Paragraphs",
    query: str = "",
    root: str | Path | None = None,
):
    return await _frames_search("drift", locals())


async def basic_search(
    config=None,
    text_units=None,
    query: str = "",
    response_type: str = "Multiple Paragraphs",
    root: str | Path | None = None,
):
    return await _frames_search("basic", locals())


def chat(
    root: str | Path = ".",
    config_file: str | Path | None = None,
    data: str | Path | None = None,
    question_count: int = 3,
    response_type: str = "Single Paragraph",
    no_llm: bool = False,
    read=input,
    write=print,
):
    """The interactive loop: local search, streaming, history and numbered follow-up questions."""
    from graphrag_ray.query.chat import chat_loop
    from graphrag_ray.query.local import LocalSearch
    from graphrag_ray.query.question_gen import LocalQuestionGen

    settings, index, models = open_index(root, config_file, data)
    local = LocalSearch(index, models, settings, root=root, response_type=response_type, no_llm=no_llm)
    return models.run(
        chat_loop(local, LocalQuestionGen(local, {"temperature": 0.5}), read, write, question_count=question_count)
    )
