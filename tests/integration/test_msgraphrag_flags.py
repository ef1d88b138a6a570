"""The flags Microsoft GraphRAG users type: index/update --output, --skip-validation, --method standard-update,
and prompt-tune's --domain --language --selection-method --limit --chunk-size --overlap --max-tokens
--discover-entity-types --output."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.helpers import cli_in_process
from tests.integration.test_index import coffee_root

DEAD = "http://127.0.0.1:9/v1"  # the discard port: nothing listens


def _point_models_at(root: Path, base_url: str) -> None:
    settings = yaml.safe_load((root / "settings.yaml").read_text(encoding="utf-8"))
    for model in settings["models"].values():
        model["api_base"] = base_url
    (root / "settings.yaml").write_text(yaml.safe_dump(settings, allow_unicode=True), encoding="utf-8")


def test_output_skip_validation_and_update_methods(tmp_path, simulator, ray_session):
    root = coffee_root(tmp_path / "coffee", simulator.base_url)
    elsewhere = tmp_path / "published-here"
    built = cli_in_process("index", "--root", root, "--output", elsewhere)
    assert built.returncode == 0, built.stderr
    assert (elsewhere / "CURRENT").exists() and not (root / "output").exists(), "--output decides where"
    assert f"index published to {elsewhere}" in " ".join(built.stdout.split())

    # every answer is cached: with the endpoint gone, the check stops the run; --skip-validation rebuilds
    # from the cache alone (no call is needed, so none fails)
    _point_models_at(root, DEAD)
    checked = cli_in_process("index", "--root", root, "--output", elsewhere, "--force")
    assert checked.returncode != 0 and "127.0.0.1:9" in checked.stderr, checked.stderr
    rebuilt = cli_in_process("index", "--root", root, "--output", elsewhere, "--force", "--skip-validation")
    assert rebuilt.returncode == 0, rebuilt.stderr
    versions = sorted(p.name for p in (elsewhere / "versions").iterdir())
    assert len(versions) == 2
    stats = json.loads((elsewhere / "versions" / versions[-1] / "stats.json").read_text())
    assert stats["total"]["failures"] == 0 and stats["total"]["calls"] == 0

    # Microsoft GraphRAG's `index --method standard-update` is our update; another method than the index's is refused
    _point_models_at(root, simulator.base_url)
    with (root / "input" / "coffee_shop.csv").open("a", encoding="utf-8") as f:
        f.write("doc9,分店,2025年1月，李明在宁波开了第二家分店，由王芳负责经营。\n")
    refused = cli_in_process("update", "--root", root, "--output", elsewhere, "--method", "fast")
    assert refused.returncode == 2 and "built with the standard method" in refused.stderr, refused.stderr
    updated = cli_in_process("index", "--root", root, "--output", elsewhere, "--method", "standard-update")
    assert updated.returncode == 0, updated.stderr
    current = (elsewhere / "CURRENT").read_text()
    stats = json.loads((elsewhere / "versions" / current / "stats.json").read_text())
    assert stats["kind"] == "update" and stats["changes"]["documents"] == {"added": 1, "changed": 0, "removed": 0}


def test_prompt_tune_takes_microsoft_graphrags_flags(tmp_path, simulator, ray_session):
    root = coffee_root(tmp_path / "tune", simulator.base_url)
    folder = tmp_path / "tuned-prompts"
    done = cli_in_process(
        "prompt-tune",
        "--root",
        root,
        "--selection-method",
        "top",
        "--limit",
        "2",
        "--domain",
        "coffee retail",
        "--language",
        "English",
        "--no-discover-entity-types",
        "--chunk-size",
        "300",
        "--overlap",
        "0",
        "--max-tokens",
        "2000",
        "--output",
        folder,
    )
    assert done.returncode == 0, done.stderr
    assert not (root / "prompts").exists(), "--output: the settings' prompt folder is left alone"
    extraction = (folder / "extract_graph.txt").read_text(encoding="utf-8")
    assert "{entity_types}" in extraction, "types not discovered: the settings' entity_types still fill the prompt"
    assert "coffee retail" in extraction and "written in English" in extraction
    assert "domain: coffee retail" in done.stdout and "language: English" in done.stdout
    assert "entity types: ORGANIZATION, PERSON, GEO, EVENT" in done.stdout
    assert "samples: 2 text units" in done.stdout
    assert f"extract_graph.prompt: {folder / 'extract_graph.txt'}" in done.stdout, "how to use them is said"
    for name in ("summarize_descriptions.txt", "community_report.txt"):
        assert (folder / name).read_text(encoding="utf-8").startswith("-Domain-\ncoffee retail.")

    auto = cli_in_process("prompt-tune", "--root", root, "--selection-method", "auto", "--k", "3", "--dry-run")
    assert auto.returncode == 0, auto.stderr
    assert "samples: 3 text units" in auto.stdout and "language: Chinese" in auto.stdout
    assert "dry run: nothing written" in auto.stdout
    budget = cli_in_process(
        "prompt-tune", "--root", root, "--selection-method", "all", "--max-tokens", "100", "--dry-run"
    )
    assert budget.returncode == 0 and "samples: 1 text units" in budget.stdout, budget.stdout + budget.stderr
    wrong = cli_in_process("prompt-tune", "--root", root, "--selection-method", "best")
    assert wrong.returncode == 2 and "--selection-method best" in wrong.stderr
