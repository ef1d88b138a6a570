"""Load settings.yaml: optional .env, ${VAR} substitution, pydantic validation with one-line errors."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, get_args, get_origin

import yaml
from dotenv import dotenv_values
from pydantic import BaseModel, ValidationError

from graphrag_ray.config.settings import Settings
from graphrag_ray.errors import ConfigError
from graphrag_ray.secrets import register_secret

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
SETTINGS_FILE = "settings.yaml"


def load_settings(
    root: str | Path = ".", config_file: str | Path | None = None, overrides: dict[str, Any] | None = None
) -> Settings:
    """Read ROOT/settings.yaml (or config_file), substitute ${VAR}s from the environment and ROOT/.env;
    `overrides` (what a command's flags say: --no-cache, --output) are merged over the file."""
    root = Path(root)
    path = Path(config_file) if config_file else root / SETTINGS_FILE
    if not path.exists():
        raise ConfigError(f"{path}: settings file not found (run `graphrag-ray init --root {root}`)")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}:{where} is not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of settings at the top level")
    foreign = microsoft_keys(raw)
    if foreign:  # theirs fails one key at a time with no hint otherwise
        raise ConfigError(
            f"{path} is a Microsoft GraphRAG settings file (it has {', '.join(foreign)}); graphrag-ray "
            f"reads its own format: `graphrag-ray init --root NEW_ROOT --from-msgraphrag {path}` "
            f"writes one from it (docs/from-msgraphrag.md maps their keys to ours)"
        )
    env = {k: v for k, v in dotenv_values(root / ".env").items() if v is not None} if (root / ".env").exists() else {}
    env.update(os.environ)  # the real environment wins over .env, as with docker/compose
    raw = _substitute(raw, env)
    if overrides:
        raw = _deep_merge(raw, overrides)
    settings = validate_settings(raw, source=str(path))
    for model in settings.models.values():
        if model.api_key is not None:
            register_secret(model.api_key.get_secret_value())
    return settings


# Keys only Microsoft GraphRAG's settings.yaml has (2.x and 3.x): top level, and its model entries' names
MICROSOFT_TOP_KEYS = (
    "completion_models",
    "embedding_models",
    "vector_store",
    "umap",
    "snapshots",
    "embed_graph",
    "input_storage",
    "output_storage",
    "update_index_output",
    "workflows",
    "root_dir",
    "encoding_model",
    "async_mode",
)
MICROSOFT_MODEL_IDS = ("default_chat_model", "default_embedding_model", "default_completion_model")


def microsoft_keys(raw: dict[str, Any]) -> list[str]:
    """The keys that make `raw` a Microsoft GraphRAG settings file (none: it is not one)."""
    found = [key for key in MICROSOFT_TOP_KEYS if key in raw]
    models = raw.get("models")
    if isinstance(models, dict):
        found += [f"models.{key}" for key in MICROSOFT_MODEL_IDS if key in models]
    return found


def validate_settings(raw: dict[str, Any], source: str = "settings") -> Settings:
    try:
        return Settings.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"{source}: {describe_error(first)}") from None


def describe_error(error: dict[str, Any]) -> str:
    """`models.default_chat.rate_limit.tpm: expected a positive integer, got 'fast'`."""
    loc = ".".join(str(p) for p in error["loc"])
    parent, field = _walk(error["loc"])
    if error["type"] == "extra_forbidden":
        known = ", ".join(parent.model_fields) if parent else ""
        return f"{loc}: unknown key" + (f" (known keys here: {known})" if known else "")
    return f"{loc}: expected {_expected(error, field)}, got {error.get('input')!r}"


def _expected(error: dict[str, Any], field: Any) -> str:
    kind, ctx = error["type"], error.get("ctx") or {}
    bounds = {type(m).__name__: m for m in (field.metadata if field else [])}
    if kind.startswith(("int_", "float_", "greater_than")):
        noun = "number" if field is not None and "float" in str(field.annotation) else "integer"
        if getattr(bounds.get("Gt"), "gt", None) == 0:
            return f"a positive {noun}"
        if getattr(bounds.get("Ge"), "ge", None) == 0:
            return f"a non-negative {noun}"
        return "an integer" if noun == "integer" else "a number"
    simple = {
        "bool_parsing": "true or false",
        "bool_type": "true or false",
        "string_type": "a string",
        "dict_type": "a mapping",
        "model_type": "a mapping",
        "model_attributes_type": "a mapping",
        "list_type": "a list",
    }
    if kind in simple:
        return simple[kind]
    if kind == "literal_error":
        return f"one of {ctx.get('expected')}"
    if kind == "less_than_equal":
        return f"a value <= {ctx.get('le')}"
    return str(error.get("msg", "a valid value")).lower()


def _model_in(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The pydantic model inside an annotation, and whether a free dict key comes before it."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    if get_origin(annotation) is dict:
        return _model_in(get_args(annotation)[1])[0], True
    for arg in get_args(annotation):
        model, keyed = _model_in(arg)
        if model is not None:
            return model, keyed
    return None, False


def _walk(loc: tuple) -> tuple[type[BaseModel] | None, Any]:
    """(model holding the last key, that key's FieldInfo) for an error location."""
    model: type[BaseModel] | None = Settings
    holder, info, skip_key = Settings, None, False
    for part in loc:
        if skip_key:
            skip_key = False
            continue
        if model is None or not isinstance(part, str) or part not in model.model_fields:
            return model, None
        holder, info = model, model.model_fields[part]
        model, skip_key = _model_in(info.annotation)
    return holder, info


def _substitute(value: Any, env: dict[str, str]) -> Any:
    if isinstance(value, str):
        return _VAR.sub(lambda m: env.get(m.group(1), m.group(2) if m.group(2) is not None else ""), value)
    if isinstance(value, dict):
        return {k: _substitute(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, env) for v in value]
    return value


def _deep_merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, val in extra.items():
        out[key] = _deep_merge(out[key], val) if isinstance(val, dict) and isinstance(out.get(key), dict) else val
    return out
