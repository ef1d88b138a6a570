"""Regenerate configs/settings.yaml from the settings model (the configuration reference)."""

from pathlib import Path

from graphrag_ray.config.render import render_settings

target = Path(__file__).resolve().parents[1] / "configs" / "settings.yaml"
target.write_text(render_settings(), encoding="utf-8")
print(f"wrote {target}")
