"""Public Python API (the CLI and jobs/ are thin layers over it)."""

from __future__ import annotations

import time
from importlib import resources
from pathlib import Path

from graphrag_ray.config.load import SETTINGS_FILE, load_settings
from graphrag_ray.config.render import render_settings
from graphrag_ray.config.settings import RetryConfig, Settings
from graphrag_ray.llm.model import Models


def default_prompts() -> dict[str, str]:
    folder = resources.files("graphrag_ray._configs") / "prompts"
    return {p.name: p.read_text(encoding="utf-8") for p in folder.iterdir() if p.name.endswith(".txt")}


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
