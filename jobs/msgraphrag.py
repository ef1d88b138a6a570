"""Microsoft GraphRAG, the reference: its own virtual environment (created on first use, never a dependency of
this project) and a project root configured like ours, against the same simulator."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

REQUIREMENT = "graphrag>=3,<4"


def ensure_venv(venv: Path) -> Path:
    """The interpreter of a venv holding Microsoft GraphRAG (latest 3.x), created if missing."""
    python = venv / "bin" / "python"
    if python.exists() and subprocess.run([str(python), "-c", "import graphrag"], capture_output=True).returncode == 0:
        return python
    print(f"creating {venv} with {REQUIREMENT} (once; takes a few minutes)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", REQUIREMENT], check=True)
    subprocess.run([str(python), "-m", "compileall", "-q", "-j", "0", str(venv / "lib")], capture_output=True)
    return python


def version(python: Path) -> str:
    out = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('graphrag'))"],
        capture_output=True,
        text=True,
    )
    return out.stdout.strip() or "?"


def init_project(python: Path, root: Path) -> None:
    """`graphrag init` (their defaults and prompts); input files are added by the caller."""
    subprocess.run(
        [
            str(python.parent / "graphrag"),
            "init",
            "--root",
            str(root),
            "-m",
            "gpt-4o-mini",
            "-e",
            "text-embedding-3-small",
            "--force",
        ],
        check=True,
        capture_output=True,
    )


def configure(
    root: Path,
    base_url: str,
    *,
    concurrency: int,
    tpm: int | None,
    rpm: int | None,
    entity_types: list[str],
    max_cluster_size: int,
    max_gleanings: int,
) -> None:
    """Their settings made equivalent to ours: same endpoint and models, chunk 1200 / overlap 100 (o200k, as
    gpt-4o-mini), the same entity types, gleanings, cluster size, requests in flight and limits."""
    path = root / "settings.yaml"
    settings = yaml.safe_load(path.read_text(encoding="utf-8"))
    for section in ("completion_models", "embedding_models"):
        for model in settings[section].values():
            model["api_base"] = base_url
            model["api_key"] = "bench-key"
            if tpm or rpm:
                model["rate_limit"] = {
                    "type": "sliding_window",
                    "period_in_seconds": 60,
                    **({"tokens_per_period": tpm} if tpm else {}),
                    **({"requests_per_period": rpm} if rpm else {}),
                }
    settings["concurrent_requests"] = concurrency
    settings["chunking"].update(size=1200, overlap=100, encoding_model="o200k_base")
    settings["extract_graph"].update(entity_types=entity_types, max_gleanings=max_gleanings)
    settings["cluster_graph"]["max_cluster_size"] = max_cluster_size
    path.write_text(yaml.safe_dump(settings, sort_keys=False), encoding="utf-8")


# their workflow names -> the stage rows of the comparison (their extract_graph also summarises descriptions)
STAGES = {
    "load_input_documents": "load+chunk",
    "create_base_text_units": "load+chunk",
    "create_final_documents": "load+chunk",
    "extract_graph": "extract+summarize",
    "finalize_graph": "finalize",
    "extract_covariates": "extract+summarize",
    "create_communities": "communities",
    "create_final_text_units": "finalize",
    "create_community_reports": "reports",
    "generate_text_embeddings": "embed",
}


def stage_walls(root: Path) -> dict[str, float]:
    path = root / "output" / "stats.json"
    if not path.exists():
        return {}
    walls: dict[str, float] = {}
    for name, info in json.loads(path.read_text()).get("workflows", {}).items():
        stage = STAGES.get(name, "finalize")
        walls[stage] = walls.get(stage, 0.0) + float(info.get("overall", 0.0))
    return walls


def workflows_done(log: Path) -> list[str]:
    """For a capped run: the workflows that finished (their console output names each as it completes)."""
    if not log.exists():
        return []
    return [
        line.split("Workflow complete: ", 1)[1].strip()
        for line in log.read_text(errors="replace").splitlines()
        if "Workflow complete: " in line
    ]
