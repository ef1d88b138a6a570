"""Shared helpers: a project root whose models point at a simulator, the command line (in a fresh interpreter or
in this one), the published index."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from graphrag_ray.config.load import load_settings
from graphrag_ray.config.settings import Settings

TEST_KEY = "sk-test-0123456789abcdef"


def simulator_settings(base_url: str, **sections: Any) -> dict:
    models = {
        "default_chat": {
            "api_base": base_url,
            "api_key": "${GRAPHRAG_API_KEY}",
            "model": "gpt-4o-mini",
            "request_timeout": 10,
            "max_tokens": 800,
            "retry": {"max_attempts": 12, "initial_wait": 0.02, "max_wait": 0.3, "jitter": 0.02},
            "price": {"input_per_1m": 0.15, "output_per_1m": 0.6},
        },
        "default_embedding": {
            "type": "embedding",
            "api_base": base_url,
            "api_key": "${GRAPHRAG_API_KEY}",
            "model": "text-embedding-3-small",
            "request_timeout": 10,
            "retry": {"max_attempts": 12, "initial_wait": 0.02, "max_wait": 0.3, "jitter": 0.02},
        },
    }
    raw: dict[str, Any] = {"models": models}
    for key, value in sections.items():
        raw[key] = value
    return raw


def make_root(root: Path, base_url: str, key: str = TEST_KEY, **sections: Any) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "settings.yaml").write_text(
        yaml.safe_dump(simulator_settings(base_url, **sections), allow_unicode=True), encoding="utf-8"
    )
    (root / ".env").write_text(f"GRAPHRAG_API_KEY={key}\n", encoding="utf-8")
    return root


def settings_for(root: Path) -> Settings:
    return load_settings(root)


def files_containing(folder: Path, needle: str) -> list[Path]:
    hits = []
    for path in Path(folder).rglob("*"):
        if path.is_file() and path.name != ".env":
            try:
                if needle.encode() in path.read_bytes():
                    hits.append(path)
            except OSError:
                continue
    return hits


def published_version(root: Path) -> str | None:
    """The version ROOT/output/CURRENT names (None before the first publish)."""
    pointer = Path(root) / "output" / "CURRENT"
    return pointer.read_text() if pointer.exists() else None


def published_index(root: Path):
    """The Store of ROOT's published index."""
    from graphrag_ray.storage.tables import current_index

    return current_index(Path(root) / "output")


def cli(*args: str, root: Path | None = None, env: dict | None = None, timeout: float = 300, **kwargs):
    """`graphrag-ray ARGS [--root ROOT]` in a fresh interpreter: for what needs a real process (a signal, an exit
    code from the interpreter, environment variables, Ray workers inheriting them); `cli_in_process` otherwise."""
    import subprocess
    import sys

    extra = ["--root", str(root)] if root is not None else []
    return subprocess.run(
        [sys.executable, "-m", "graphrag_ray.cli", *args, *extra],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        **kwargs,
    )


class CliRun:
    """What one in-process command printed and its exit code."""

    def __init__(self, code: int, stdout: str, stderr: str):
        self.returncode, self.stdout, self.stderr = code, stdout, stderr


def cli_in_process(*args: str, root: Path | None = None) -> CliRun:
    """`graphrag-ray ARGS [--root ROOT]` run by `main()` in this interpreter (no fresh Python to start); the same
    error handling and exit codes as the installed command, and the same `returncode`, `stdout` and `stderr` as
    `cli`'s. Use a subprocess where a signal, a real exit or the environment matters."""
    import contextlib
    import io

    from graphrag_ray.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in args] + (["--root", str(root)] if root is not None else []))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return CliRun(code, out.getvalue(), err.getvalue())


def write_input(root: Path, name: str, text: str) -> None:
    """ROOT/input/NAME holding TEXT (a document added or edited before an update)."""
    (root / "input" / name).write_text(text, encoding="utf-8")


def check_communities(index) -> None:
    """The published communities are a hierarchy: parents hold their children's members, every entity with an
    edge is in one community per level."""
    import polars as pl

    from graphrag_ray.storage.tables import read_table

    comms = read_table(index, "communities")
    entities = set(read_table(index, "entities").filter(pl.col("degree") > 0)["id"])
    by_number = {r["community"]: r for r in comms.iter_rows(named=True)}
    for row in by_number.values():
        if row["parent"] >= 0:
            parent = by_number[row["parent"]]  # parents exist
            assert set(row["entity_ids"]) <= set(parent["entity_ids"]) and row["community"] in parent["children"]
    for level in set(comms["level"]):
        at = comms.filter(pl.col("level") == level)
        members = [e for ids in at["entity_ids"] for e in ids]
        assert len(members) == len(set(members)), "every entity in one community per level"
    level0 = {e for ids in comms.filter(pl.col("level") == 0)["entity_ids"] for e in ids}
    assert level0 == entities


def offline_example(root: Path, executor: str = "auto") -> Path:
    """examples/coffee_shop copied to ROOT (the offline `fast` method, no endpoint), run on `executor`."""
    import shutil

    example = Path(__file__).parents[1] / "examples" / "coffee_shop"
    shutil.copytree(example, root, ignore=shutil.ignore_patterns("output", "cache", "runs", "logs"))
    settings = yaml.safe_load((root / "settings.yaml").read_text(encoding="utf-8"))
    settings["workers"]["executor"] = executor
    (root / "settings.yaml").write_text(yaml.safe_dump(settings, allow_unicode=True), encoding="utf-8")
    return root


def built_offline_example(root: Path, executor: str = "auto") -> Path:
    """`offline_example`, indexed by the command in a process of its own."""
    import subprocess
    import sys

    offline_example(root, executor)
    done = subprocess.run(
        [sys.executable, "-m", "graphrag_ray.cli", "index", "--root", str(root), "--method", "fast"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return root
