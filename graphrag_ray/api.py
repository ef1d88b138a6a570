"""Public Python API (the CLI and jobs/ are thin layers over it)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from graphrag_ray.config.load import SETTINGS_FILE, load_settings
from graphrag_ray.config.prompts import default_prompts
from graphrag_ray.config.render import render_settings
from graphrag_ray.config.settings import RetryConfig, Settings
from graphrag_ray.llm.model import Models
from graphrag_ray.storage.location import as_location, resolve
from graphrag_ray.storage.tables import current_index


def init_project(root: str | Path, force: bool = False) -> list[Path]:
    root = Path(root)
    (root / "input").mkdir(parents=True, exist_ok=True)
    files = {root / SETTINGS_FILE: render_settings(),
             root / ".env": "# secrets for settings.yaml's ${VAR}s; keep this file out of version control\n"
                            "GRAPHRAG_API_KEY=\n"}
    files.update({root / "prompts" / name: text for name, text in default_prompts().items()})
    written = []
    for path, text in files.items():
        if path.exists() and not force:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


async def preflight(models: Models, model_ids: list[str]) -> list[str]:
    """One tiny uncached request per model with a short retry budget, so a bad key, a wrong model name or
    an unreachable endpoint stops a command in seconds instead of after the whole retry budget."""
    lines = []
    for model_id in model_ids:
        cfg = models.settings.model(model_id)
        quick = cfg.model_copy(update={"retry": RetryConfig(max_attempts=2, initial_wait=0.2, max_wait=1.0,
                                                            jitter=0.1),
                                       "request_timeout": min(cfg.request_timeout, 30.0)})
        started = time.perf_counter()
        if cfg.type == "embedding":
            from graphrag_ray.llm.model import EmbeddingModel

            probe = EmbeddingModel(model_id, quick, cache=models.cache.__class__(None), limiter=models.limiter,
                                   ledger=models.ledger)
            await probe.embed(["ping"], stage="preflight")
        else:
            from graphrag_ray.llm.model import ChatModel

            probe = ChatModel(model_id, quick, cache=models.cache.__class__(None), limiter=models.limiter,
                              ledger=models.ledger)
            await probe.chat([{"role": "user", "content": "ping"}], stage="preflight", max_tokens=1,
                             use_cache=False)
        lines.append(f"ok: {probe.client.where} answered in {1000 * (time.perf_counter() - started):.0f} ms")
        await probe.client.close()
    return lines


async def preflight_endpoints(settings: Settings, model_ids: list[str]) -> None:
    """Before a run spends anything: each endpoint answers, accepts its key and knows the model (GET /models -
    no tokens, so a fully cached re-run still makes zero LLM calls). Raises a one-line error otherwise."""
    from graphrag_ray.errors import LLMFatalError, LLMUnavailableError
    from graphrag_ray.llm.client import OpenAIClient, TransientLLMError

    for model_id in dict.fromkeys(model_ids):
        cfg = settings.model(model_id)
        if cfg.type == "local_embedding":
            continue
        quick = cfg.model_copy(update={"request_timeout": min(cfg.request_timeout, 15.0)})
        client = OpenAIClient(model_id, quick)
        try:
            for attempt in range(3):
                try:
                    names = await client.list_models()
                    break
                except TransientLLMError as exc:
                    if attempt == 2:
                        raise LLMUnavailableError(f"{client.where} is unreachable or failing ({exc})") from None
                    await asyncio.sleep(0.5 * (attempt + 1))
            if cfg.api_type == "openai" and names and cfg.model not in names:
                raise LLMFatalError(f"{client.where}: model not found (the endpoint serves: "
                                    f"{', '.join(sorted(names)[:8])}{', ...' if len(names) > 8 else ''})")
        except LLMFatalError as exc:
            if "not found (404)" in str(exc):  # servers without /models: the first real call will tell
                continue
            raise
        finally:
            await client.close()


async def check_models(root: str | Path, config_file: str | Path | None = None) -> list[str]:
    settings: Settings = load_settings(root, config_file)
    models = Models.create(settings, root)
    return [f"settings: {Path(config_file or Path(root) / SETTINGS_FILE)} is valid"] + \
        await preflight(models, list(settings.models))


def build_index(config=None, root: str | Path = ".", config_file: str | Path | None = None, method: str = "standard",
                resume: bool = True, show_progress: bool = False, verbose: bool = False):
    """Index ROOT's input into ROOT/output (Microsoft GraphRAG's `build_index(config)` shape: pass a loaded
    Settings as `config`, or a root)."""
    from graphrag_ray.index.pipeline import build_index as run

    return run(root, config_file, method=method, resume=resume, show_progress=show_progress, verbose=verbose,
               settings=config)


# ----------------------------------------------------------------------------------------------- query
def open_index(root: str | Path = ".", config_file: str | Path | None = None, data: str | Path | None = None,
               settings: Settings | None = None, vectors: bool = True):
    """(settings, IndexData, models) for queries against ROOT/output (or `data`); `vectors=False` leaves the
    LanceDB tables closed (global search needs none, and opening them costs lancedb's import)."""
    from graphrag_ray.query.index_data import IndexData

    settings = settings or load_settings(root, config_file)
    folder = as_location(data) if data else resolve(root, settings.output.base_dir)
    return settings, IndexData.load(folder, open_vectors=vectors), Models.create(settings, root)


async def search(query: str, method: str = "local", root: str | Path = ".", config_file: str | Path | None = None,
                 data: str | Path | None = None, community_level: int | None = None,
                 dynamic_community_selection: bool = False, response_type: str | None = None,
                 conversation_history=None, context_only: bool = False, settings: Settings | None = None,
                 no_llm: bool = False):
    """Any method, `auto` included; returns a SearchResult (its details say the route taken)."""
    from graphrag_ray.query.factory import check_query, make_engine
    from graphrag_ray.query.router import route

    settings, index, models = open_index(root, config_file, data, settings, vectors=method != "global")
    # the default level is capped at the index's depth; a level the user asks for must exist
    level = min(settings.query.community_level, index.max_level) if community_level is None else community_level
    check_query(query, method, index, level)
    no_llm = no_llm or not models.has_chat(settings.global_search.chat_model_id)
    chosen, why = (method, "") if method != "auto" else await route(query, index, models, settings, Path(root),
                                                                     use_llm=not no_llm)
    engine = make_engine(chosen, index, models, settings, Path(root), response_type,
                         min(level, index.max_level), dynamic_community_selection, no_llm)
    result = await (engine.context_only(query, conversation_history) if context_only
                    else engine.search(query, conversation_history))
    if method == "auto":
        result.details["route"], result.details["route_reason"] = chosen, why
    return result


def _frames_engine(method: str, config, root, community_level, response_type, dynamic=False, **frames):
    from graphrag_ray.query.factory import make_engine
    from graphrag_ray.query.index_data import IndexData

    settings = config or load_settings(root)
    published = current_index(resolve(root, settings.output.base_dir)) if root else None
    vectors = f"{published}/lancedb" if published else None
    index = IndexData.from_frames(vectors_dir=vectors, **frames)
    return make_engine(method, index, Models.create(settings, root or "."), settings, Path(root) if root else None,
                       response_type, community_level, dynamic)


async def local_search(config=None, entities=None, communities=None, community_reports=None, text_units=None,
                       relationships=None, covariates=None, community_level: int = 2,
                       response_type: str = "Multiple Paragraphs", query: str = "", conversation_history=None,
                       root: str | Path | None = None):
    """Microsoft GraphRAG's signature: returns (response, context_data)."""
    engine = _frames_engine("local", config, root, community_level, response_type, entities=entities,
                            communities=communities, community_reports=community_reports, text_units=text_units,
                            relationships=relationships)
    result = await engine.search(query, conversation_history)
    return result.response, result.context_data


async def global_search(config=None, entities=None, communities=None, community_reports=None,
                        community_level: int | None = 2, dynamic_community_selection: bool = False,
                        response_type: str = "Multiple Paragraphs", query: str = "", root: str | Path | None = None):
    engine = _frames_engine("global", config, root, community_level, response_type, dynamic_community_selection,
                            entities=entities, communities=communities, community_reports=community_reports)
    result = await engine.search(query)
    return result.response, result.context_data


async def drift_search(config=None, entities=None, communities=None, community_reports=None, text_units=None,
                       relationships=None, community_level: int = 2, response_type: str = "Multiple Paragraphs",
                       query: str = "", root: str | Path | None = None):
    engine = _frames_engine("drift", config, root, community_level, response_type, entities=entities,
                            communities=communities, community_reports=community_reports, text_units=text_units,
                            relationships=relationships)
    result = await engine.search(query)
    return result.response, result.context_data


async def basic_search(config=None, text_units=None, query: str = "", response_type: str = "Multiple Paragraphs",
                       root: str | Path | None = None):
    engine = _frames_engine("basic", config, root, None, response_type, text_units=text_units)
    result = await engine.search(query)
    return result.response, result.context_data


async def search_streaming(query: str, method: str = "local", root: str | Path = ".", **kwargs):
    """Yield answer chunks of any method but auto (`local_search_streaming` etc. are this with a method)."""
    from graphrag_ray.query.factory import check_query, make_engine

    settings, index, models = open_index(root, kwargs.pop("config_file", None), kwargs.pop("data", None),
                                         kwargs.pop("settings", None))
    level = kwargs.pop("community_level", None)
    level = min(settings.query.community_level, index.max_level) if level is None else level
    check_query(query, method, index, level)
    history = kwargs.pop("conversation_history", None)
    engine = make_engine(method, index, models, settings, Path(root), community_level=level, **kwargs)
    async for chunk in engine.stream_search(query, history):
        yield chunk


def local_search_streaming(query: str, root: str | Path = ".", **kwargs):
    return search_streaming(query, "local", root, **kwargs)


def global_search_streaming(query: str, root: str | Path = ".", **kwargs):
    return search_streaming(query, "global", root, **kwargs)


def drift_search_streaming(query: str, root: str | Path = ".", **kwargs):
    return search_streaming(query, "drift", root, **kwargs)


def basic_search_streaming(query: str, root: str | Path = ".", **kwargs):
    return search_streaming(query, "basic", root, **kwargs)
