"""Render the settings model as a commented settings.yaml (the configuration reference)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, SecretStr

from graphrag_ray.config.settings import Settings

HEADER = """# graphrag-ray settings. Every key is optional: what is left out takes the default shown here.
# ${VAR} (or ${VAR:-default}) is replaced from the environment or ROOT/.env; keep API keys out of this file.
"""


def render_settings(settings: BaseModel | None = None) -> str:
    settings = settings or Settings()
    return HEADER + "\n".join(_render_model(settings, 0)) + "\n"


def _scalar(value: Any) -> str:
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return (
            json.dumps(value, ensure_ascii=False)
            if (not value or any(c in value for c in ":#{}[],&*?|<>=!%@`'\"") or value.strip() != value)
            else value
        )
    if isinstance(value, list):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _render_model(model: BaseModel, indent: int) -> list[str]:
    pad = "  " * indent
    lines: list[str] = []
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        if info.description:
            lines.append(f"{pad}# {info.description}")
        if isinstance(value, BaseModel):
            lines.append(f"{pad}{name}:")
            lines.extend(_render_model(value, indent + 1))
        elif isinstance(value, dict) and value and all(isinstance(v, BaseModel) for v in value.values()):
            lines.append(f"{pad}{name}:")
            for key, sub in value.items():
                lines.append(f"{pad}  {key}:")
                lines.extend(_render_model(sub, indent + 2))
        else:
            lines.append(f"{pad}{name}: {_scalar(value)}")
    return lines
