"""`graphrag-ray init --from-msgraphrag PATH/settings.yaml`: our settings written from Microsoft GraphRAG's.

Reads their 2.x (`models:`) or 3.x (`completion_models:` / `embedding_models:`) file as it is - `${VAR}`s are kept,
not substituted - and returns our settings as a plain dict, the prompt files to copy, and one line per thing that
has no counterpart here (a user who knows their file is told what we did not take, never left to guess).
docs/from-msgraphrag.md is the same map, for reading.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from graphrag_ray.config.prompts import default_prompts
from graphrag_ray.errors import ConfigError

# (their keys, first one found wins; our key) - values copied as they are
SAME_VALUES: list[tuple[tuple[str, ...], str]] = [
    (("input.encoding",), "input.encoding"),
    (("input.id_column",), "input.id_column"),
    (("input.title_column",), "input.title_column"),
    (("input.text_column",), "input.text_column"),
    (("chunking.size", "chunks.size"), "chunks.size"),
    (("chunking.overlap", "chunks.overlap"), "chunks.overlap"),
    (("chunking.encoding_model", "chunks.encoding_model"), "chunks.encoding"),
    (("extract_graph.entity_types",), "extract_graph.entity_types"),
    (("extract_graph.max_gleanings",), "extract_graph.max_gleanings"),
    (("summarize_descriptions.max_length",), "summarize_descriptions.max_length"),
    (("summarize_descriptions.max_input_tokens",), "summarize_descriptions.max_input_tokens"),
    (("cluster_graph.max_cluster_size",), "cluster_graph.max_cluster_size"),
    (("cluster_graph.seed",), "cluster_graph.seed"),
    (("community_reports.max_length",), "community_reports.max_length"),
    (("community_reports.max_input_length",), "community_reports.max_input_length"),
    (("extract_claims.enabled",), "extract_claims.enabled"),
    (("extract_claims.description",), "extract_claims.description"),
    (("extract_claims.max_gleanings",), "extract_claims.max_gleanings"),
    (("local_search.top_k_entities",), "local_search.top_k_entities"),
    (("local_search.top_k_relationships",), "local_search.top_k_relationships"),
    (("local_search.max_context_tokens",), "local_search.max_context_tokens"),
    (("local_search.text_unit_prop",), "local_search.text_unit_prop"),
    (("local_search.community_prop",), "local_search.community_prop"),
    (("local_search.conversation_history_max_turns",), "local_search.conversation_history_max_turns"),
    (("global_search.data_max_tokens",), "global_search.data_max_tokens"),
    (("global_search.map_max_length",), "global_search.map_max_length"),
    (("global_search.reduce_max_length",), "global_search.reduce_max_length"),
    (("global_search.dynamic_search_threshold",), "global_search.dynamic_threshold"),
    (("global_search.dynamic_search_num_repeats",), "global_search.dynamic_repeats"),
    (("global_search.dynamic_search_max_level",), "global_search.dynamic_max_level"),
    (("basic_search.k",), "basic_search.k"),
    (("basic_search.max_context_tokens",), "basic_search.max_context_tokens"),
    (("drift_search.n_depth",), "drift_search.n_depth"),
    (("drift_search.drift_k_followups",), "drift_search.k_followups"),
    (("drift_search.concurrency",), "drift_search.concurrency"),
]
# their default model ids -> ours (any other id is kept)
OUR_MODEL_IDS = {
    "default_chat_model": "default_chat",
    "default_completion_model": "default_chat",
    "default_embedding_model": "default_embedding",
}
INPUT_TYPES = {"text": "text", "csv": "csv", "json": "json", "jsonl": "jsonl", "parquet": "parquet"}
# their section's model key -> our sections taking that model (the first one of theirs found decides)
CHAT_USERS = {
    "extract_graph": ["extract_graph.model_id", "resolve_entities.model_id"],
    "summarize_descriptions": ["summarize_descriptions.model_id"],
    "community_reports": ["community_reports.model_id"],
    "extract_claims": ["extract_claims.model_id"],
    "local_search": ["local_search.chat_model_id"],
    "global_search": ["global_search.chat_model_id"],
    "drift_search": ["drift_search.chat_model_id"],
    "basic_search": ["basic_search.chat_model_id"],
}
EMBEDDING_USERS = {
    "embed_text": ["embed_text.model_id", "resolve_entities.embedding_model_id"],
    "local_search": ["local_search.embedding_model_id"],
    "drift_search": ["drift_search.embedding_model_id"],
    "basic_search": ["basic_search.embedding_model_id"],
}
# their prompt key -> our prompt file (copied when ours can fill every placeholder it has)
PROMPTS = {
    "extract_graph.prompt": "extract_graph.txt",
    "summarize_descriptions.prompt": "summarize_descriptions.txt",
    "community_reports.graph_prompt": "community_report.txt",
    "extract_claims.prompt": "extract_claims.txt",
    "local_search.prompt": "local_search_system.txt",
    "global_search.map_prompt": "global_search_map_system.txt",
    "global_search.reduce_prompt": "global_search_reduce_system.txt",
    "global_search.knowledge_prompt": "global_search_knowledge_system.txt",
    "drift_search.reduce_prompt": "drift_search_reduce.txt",
    "basic_search.prompt": "basic_search_system.txt",
}
NO_COUNTERPART = {
    "vector_store": "our vectors are LanceDB tables inside each index version",
    "snapshots": "`graphrag-ray export` writes GraphML/GEXF/Neo4j CSV from any index",
    "umap": "`graphrag-ray view` lays the graph out",
    "embed_graph": "`graphrag-ray view` lays the graph out",
    "extract_graph_nlp": "our no-LLM method is `index --method fast` (settings: fast.*)",
    "prune_graph": "our fast method prunes by fast.min_node_frequency / edge_percentile",
    "workflows": "methods are step lists: `--method standard` or `--method fast`",
    "reporting": "runs log to the console; the usage ledger is written beside the output",
    "community_reports.text_prompt": "the fast method's reports are extractive (no LLM)",
    "drift_search.prompt": "our DRIFT follow-up prompt answers in JSON; theirs is not copied",
    "cluster_graph.use_lcc": "every connected component is clustered",
}
# what _models reads of an entry (and `type`, `model_provider`, `retry.type`: kinds of what it reads)
MODEL_KEYS_READ = {
    "type",
    "model_provider",
    "api_base",
    "api_version",
    "api_key",
    "auth_method",
    "model",
    "azure_deployment_name",
    "deployment_name",
    "encoding_model",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "request_timeout",
    "concurrent_requests",
    "dimensions",
    "call_args",
    "requests_per_minute",
    "tokens_per_minute",
    "rate_limit",
    "retry",
    "max_retries",
    "max_retry_wait",
    "model_supports_json",
    "async_mode",
}
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
# filled beyond what our own prompt file uses (query/global_search.py fills max_length for their prompts)
ALSO_FILLED = {"global_search_map_system.txt": {"max_length"}, "global_search_reduce_system.txt": {"max_length"}}


@dataclass
class Translated:
    settings: dict[str, Any]
    prompts: dict[str, Path] = field(default_factory=dict)  # our prompt file name -> their file
    env: dict[str, str] = field(default_factory=dict)  # literal keys moved into .env, by variable
    notes: list[str] = field(default_factory=list)  # what was not taken, and why


def read_msgraphrag(path: Path, our_root: Path) -> Translated:
    """Our settings from their file at `path` (prompts and input paths are theirs, relative to its folder)."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"--from-msgraphrag {path}: cannot read it ({type(exc).__name__})") from None
    if isinstance(raw, dict):
        raw = _as_2x(raw)
    if not isinstance(raw, dict) or not ({"models", "completion_models", "embedding_models"} & set(raw)):
        raise ConfigError(
            f"--from-msgraphrag {path}: not a Microsoft GraphRAG settings file (no models, "
            "completion_models or embedding_models, and no 1.x `llm`)"
        )
    their_root = path.resolve().parent
    out = Translated({})
    taken: set[str] = set()
    ids = _models(raw, out, taken)
    for theirs, ours in SAME_VALUES:
        for key in theirs:
            value = _get(raw, key)
            if value is not None:
                _set(out.settings, ours, value)
                taken.add(key)
                break
    if (_get(raw, "chunking.type") or "tokens") == "tokens":  # ours cut by tokens; their sentence chunker: noted
        taken.add("chunking.type")
    _input(raw, out, taken, their_root, our_root)
    _places(raw, out, taken, their_root, our_root)
    _model_users(raw, out, taken, ids)
    _prompts(raw, out, taken, their_root)
    said = set()
    for leaf, value in _leaves(raw):
        if value in (None, False, "", []) or leaf in taken or any(leaf.startswith(t + ".") for t in taken):
            continue  # what is off or empty loses nothing
        key = next((k for k in NO_COUNTERPART if leaf == k or leaf.startswith(k + ".")), leaf)
        if key not in said:
            said.add(key)
            out.notes.append(f"{key}: no counterpart" + (f" ({NO_COUNTERPART[key]})" if key in NO_COUNTERPART else ""))
    return out


def _as_2x(raw: dict) -> dict:
    """A 0.x / 1.x file (one chat model under `llm`, one embedding model under `embeddings.llm`, the encoding at the
    top) in 2.x's shape, so one translation reads both; a 2.x / 3.x file as it is."""
    if "llm" not in raw or "models" in raw:
        return raw
    raw = dict(raw)
    chat = dict(raw.pop("llm") or {})
    embeddings = dict(raw.pop("embeddings", None) or {})
    embedding = dict(embeddings.pop("llm", None) or {})
    encoding = raw.pop("encoding_model", None)
    if encoding:
        chat.setdefault("encoding_model", encoding)
        raw.setdefault("chunks", {})
        raw["chunks"] = {**raw["chunks"], "encoding_model": raw["chunks"].get("encoding_model", encoding)}
    for old_name, new_name in (("entity_extraction", "extract_graph"), ("claim_extraction", "extract_claims")):
        if old_name in raw and new_name not in raw:
            raw[new_name] = raw.pop(old_name)
    if isinstance(raw.get("storage"), dict) and "output" not in raw:  # 1.x's output folder
        raw["output"] = raw.pop("storage")
    if isinstance(raw.get("input"), dict) and "file_encoding" in raw["input"]:
        raw["input"] = {**raw["input"], "encoding": raw["input"]["file_encoding"]}
        del raw["input"]["file_encoding"]
    reports = raw.get("community_reports")
    if isinstance(reports, dict) and "prompt" in reports and "graph_prompt" not in reports:
        raw["community_reports"] = {**reports, "graph_prompt": reports["prompt"]}
        del raw["community_reports"]["prompt"]
    chat.setdefault("type", "openai_chat")
    embedding.setdefault("type", "openai_embedding")
    raw["models"] = {"default_chat_model": chat, "default_embedding_model": embedding}
    if embeddings:  # what else their embeddings section set (vector store, batch sizes): said as theirs
        raw["embed_text"] = embeddings
    return raw


def _models(raw: dict, out: Translated, taken: set[str]) -> dict[str, str]:
    """Their model entries as ours, under their ids; returns id -> "chat" | "embedding"."""
    entries: list[tuple[str, str, dict]] = []
    for section, kind in (("completion_models", "chat"), ("embedding_models", "embedding")):
        for model_id, cfg in (raw.get(section) or {}).items():
            entries.append((f"{section}.{model_id}", kind, cfg or {}))
    for model_id, cfg in (raw.get("models") or {}).items():  # 2.x: the kind is in the type
        entries.append(
            (
                f"models.{model_id}",
                "embedding" if "embedding" in str((cfg or {}).get("type", "")) else "chat",
                cfg or {},
            )
        )
    kinds, models = {}, {}
    shared_concurrency = raw.get("concurrent_requests")
    if shared_concurrency is not None:
        taken.add("concurrent_requests")
    for where, kind, cfg in entries:
        model_id = OUR_MODEL_IDS.get(where.split(".", 1)[1], where.split(".", 1)[1])
        ours: dict[str, Any] = {"type": kind}
        azure = cfg.get("model_provider") == "azure" or str(cfg.get("type", "")).startswith("azure")
        ours["api_type"] = "azure" if azure else "openai"
        if cfg.get("api_base"):
            ours["api_base"] = cfg["api_base"]
        if cfg.get("api_version"):
            ours["api_version"] = cfg["api_version"]
        deployment = cfg.get("azure_deployment_name") or cfg.get("deployment_name")
        ours["model"] = deployment if azure and deployment else cfg.get("model")
        key = _key_reference(cfg.get("api_key"), model_id, where, out)
        if key:
            ours["api_key"] = key
        if cfg.get("auth_method") not in (None, "api_key"):
            out.notes.append(f"{where}.auth_method: {cfg['auth_method']} has no counterpart (an API key is used)")
        ours.update(_call_settings(cfg))
        if "concurrency" not in ours and shared_concurrency is not None:
            ours["concurrency"] = shared_concurrency
        ours.update(_limits(cfg))
        for unknown in sorted(set(cfg) - MODEL_KEYS_READ):
            out.notes.append(f"{where}.{unknown}: no counterpart")
        models[model_id] = ours
        kinds[model_id] = kind
        taken.add(where)
    if not any(k == "chat" for k in kinds.values()):
        raise ConfigError("--from-msgraphrag: the file defines no chat (completion) model")
    out.settings["models"] = models
    return kinds


def _key_reference(key: Any, model_id: str, where: str, out: Translated) -> Any:
    """Their api_key as ours: a ${VAR} as it is; a literal key moved into .env (a second key: its own variable)
    and referred to - never written into our settings file."""
    if not (isinstance(key, str) and key and not key.startswith("${")):
        return key
    variable = "GRAPHRAG_API_KEY"
    if out.env.get(variable, key) != key:
        variable += "_" + re.sub(r"\W", "_", model_id).upper()
    out.env[variable] = key
    out.notes.append(f"{where}.api_key: a literal key, moved into .env as {variable}")
    return "${" + variable + "}"


# their model keys (or call_args) -> ours
_CALL_KEYS = (
    ("encoding_model", "encoding"),
    ("max_tokens", "max_tokens"),
    ("max_completion_tokens", "max_tokens"),
    ("temperature", "temperature"),
    ("request_timeout", "request_timeout"),
    ("concurrent_requests", "concurrency"),
    ("dimensions", "dimensions"),
)


def _call_settings(cfg: dict) -> dict:
    """Their token, timeout and concurrency keys as ours (a later key of _CALL_KEYS wins, as it always did)."""
    call_args = cfg.get("call_args") or {}
    out: dict[str, Any] = {}
    for theirs, our in _CALL_KEYS:
        value = cfg.get(theirs, call_args.get(theirs))
        if value is not None:
            out[our] = value
    return out


def _limits(cfg: dict) -> dict:
    """2.x's per-minute numbers and max_retries; 3.x's rate_limit (per period) and retry blocks."""
    limits: dict[str, Any] = {}
    rpm, tpm = cfg.get("requests_per_minute"), cfg.get("tokens_per_minute")
    window = cfg.get("rate_limit") or {}
    if window.get("requests_per_period") or window.get("tokens_per_period"):
        per_minute = 60 / float(window.get("period_in_seconds") or 60)
        rpm = int(window["requests_per_period"] * per_minute) if window.get("requests_per_period") else rpm
        tpm = int(window["tokens_per_period"] * per_minute) if window.get("tokens_per_period") else tpm
    rate = {k: v for k, v in (("rpm", rpm), ("tpm", tpm)) if isinstance(v, int) and v > 0}
    if rate:
        limits["rate_limit"] = rate
    retry_block = cfg.get("retry") or {}
    retry = {
        k: v
        for k, v in (
            ("max_attempts", cfg.get("max_retries", retry_block.get("max_retries"))),
            ("initial_wait", retry_block.get("base_delay")),
            ("max_wait", cfg.get("max_retry_wait", retry_block.get("max_delay"))),
        )
        # -1 (their `graphrag init` template's max_retries) and other non-positive numbers mean "their default":
        # ours applies
        if v is not None and not (isinstance(v, (int, float)) and v <= 0)
    }
    if retry:
        limits["retry"] = retry
    return limits


def _model_users(raw: dict, out: Translated, taken: set[str], kinds: dict[str, str]) -> None:
    """Which model each stage uses: the one their section names (under our id for it), else the first of the
    kind."""
    for users, kind, names in (
        (CHAT_USERS, "chat", ("completion_model_id", "model_id", "chat_model_id")),
        (EMBEDDING_USERS, "embedding", ("embedding_model_id", "model_id")),
    ):
        fallback = next((m for m, k in kinds.items() if k == kind), None)
        for section, ours in users.items():
            model_id = fallback
            for name in names:
                theirs = _get(raw, f"{section}.{name}")
                if kinds.get(OUR_MODEL_IDS.get(theirs, theirs)) == kind:
                    model_id = OUR_MODEL_IDS.get(theirs, theirs)
                    taken.add(f"{section}.{name}")
                    break
            for key in ours if model_id else ():
                _set(out.settings, key, model_id)
    if "embedding" not in kinds.values():
        out.notes.append(
            "no embedding model: embed_text.enabled is off (add one, or a local_embedding that needs no endpoint)"
        )
        _set(out.settings, "embed_text.enabled", False)


def _input(raw: dict, out: Translated, taken: set[str], their_root: Path, our_root: Path) -> None:
    # 2.x: input.type is the storage (file, blob) and input.file_type the format; 3.x: input.type is the format
    storage = _get(raw, "input.type") if _get(raw, "input.file_type") or _get(raw, "input.type") == "file" else None
    if storage == "file":
        taken.add("input.type")
    kind = _get(raw, "input.file_type") or (_get(raw, "input.type") if storage is None else None)
    if kind is not None:
        taken.update({"input.file_type"} | ({"input.type"} if storage is None else set()))
        if kind in INPUT_TYPES:
            _set(out.settings, "input.file_type", INPUT_TYPES[kind])
        else:
            out.notes.append(f"input.type: {kind} has no counterpart (ours read text, csv, json, jsonl, parquet)")
    pattern = _get(raw, "input.file_pattern")
    if pattern:  # theirs is a regular expression, ours a glob: the common shape only
        taken.add("input.file_pattern")
        suffix = re.fullmatch(r"\.\*\\?\.(\w+)\$?", str(pattern))
        if suffix:
            _set(out.settings, "input.file_pattern", f"*.{suffix.group(1)}")
        else:
            out.notes.append(
                f"input.file_pattern: {pattern!r} is a regular expression; ours is a glob - set "
                "input.file_pattern by hand"
            )
    base = next(
        (
            (k, _get(raw, k))
            for k in ("input_storage.base_dir", "input.storage.base_dir", "input.base_dir")
            if _get(raw, k)
        ),
        None,
    )
    for key in ("input_storage.type", "input.storage.type"):
        if _get(raw, key) in ("file", None):
            taken.add(key)
    where = base[1] if base else "input"
    taken.add(base[0]) if base else None
    _set(out.settings, "input.base_dir", _relative(their_root / where, our_root))


def _places(raw: dict, out: Translated, taken: set[str], their_root: Path, our_root: Path) -> None:
    """Output and cache: ours, under our root - their folders hold their formats. Beside theirs (one root) ours
    get their own names."""
    same = their_root == our_root.resolve()
    for key in (
        "output_storage.base_dir",
        "output_storage.type",
        "output.base_dir",
        "output.type",
        "cache.base_dir",
        "cache.type",
        "cache.storage.base_dir",
        "cache.storage.type",
    ):
        if _get(raw, key) is not None:
            taken.add(key)
    if same:
        _set(out.settings, "output.base_dir", "output-graphrag-ray")
        _set(out.settings, "output.runs_dir", "runs-graphrag-ray")
        _set(out.settings, "cache.base_dir", "cache-graphrag-ray")
    if _get(raw, "cache.type") == "none":
        _set(out.settings, "cache.enabled", False)
    theirs = _get(raw, "output_storage.base_dir") or _get(raw, "output.base_dir") or "output"
    if (their_root / theirs).is_dir():
        out.notes.append(
            f"their index in {their_root / theirs} is read as it is: `graphrag-ray query --data "
            f"{their_root / theirs} ...` (and view, export, report)"
        )
    else:
        out.notes.append(
            f"no index of theirs in {their_root / theirs} (yet): once `graphrag index` has written one, "
            f"`graphrag-ray query --data {their_root / theirs} ...` reads it as it is"
        )


def _prompts(raw: dict, out: Translated, taken: set[str], their_root: Path) -> None:
    ours = default_prompts()
    for key, name in PROMPTS.items():
        relative = _get(raw, key)
        if not relative:
            continue
        taken.add(key)
        path = their_root / relative
        if not path.exists():
            continue
        wanted = set(_PLACEHOLDER.findall(path.read_text(encoding="utf-8")))
        fillable = (
            set(_PLACEHOLDER.findall(ours[name]))
            | ALSO_FILLED.get(name, set())
            | {"tuple_delimiter", "record_delimiter", "completion_delimiter"}
        )
        if wanted <= fillable:
            out.prompts[name] = path
        else:
            out.notes.append(
                f"{key}: {relative} not copied - it needs {', '.join(sorted(wanted - fillable))}, "
                f"which ours does not fill (prompts/{name} is ours)"
            )


def _relative(path: Path, root: Path) -> str:
    try:
        return os.path.relpath(path.resolve(), root.resolve())
    except ValueError:  # another drive
        return str(path.resolve())


def _get(raw: dict, dotted: str):
    node: Any = raw
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _set(target: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    for part in parents:
        target = target.setdefault(part, {})
    target[last] = value


def _leaves(raw: dict, prefix: str = "") -> list[tuple[str, Any]]:
    found = []
    for key, value in raw.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            found += _leaves(value, path + ".")
        else:
            found.append((path, value))
    return found
