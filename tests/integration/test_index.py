"""End-to-end indexing of the coffee-shop corpus against the simulator."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from graphrag_ray.api import build_index
from graphrag_ray.storage.schemas import REQUIRED_TABLES, SCHEMAS
from graphrag_ray.storage.tables import read_table
from graphrag_ray.storage.vectors import VECTOR_TABLES, open_vectors
from tests.helpers import make_root

# the seeds' example corpus (four Chinese documents), shipped with the repository
COFFEE = Path(__file__).resolve().parents[2] / "examples" / "coffee_shop" / "input" / "coffee_shop.csv"


def coffee_root(tmp: Path, base_url: str) -> Path:
    root = make_root(tmp, base_url)
    (root / "input").mkdir(exist_ok=True)
    shutil.copy(COFFEE, root / "input" / "coffee_shop.csv")
    return root


@pytest.fixture(scope="module")
def coffee(tmp_path_factory, simulator, ray_session):
    root = coffee_root(tmp_path_factory.mktemp("coffee"), simulator.base_url)
    first = build_index(root=root)
    snapshot = {name: read_table(first.index, name) for name in REQUIRED_TABLES}
    return root, first, snapshot


def test_every_table_with_graphrag_columns(coffee):
    root, result, tables = coffee
    for name in REQUIRED_TABLES:
        df = tables[name]
        assert df is not None and df.height > 0, name
        assert dict(df.schema) == SCHEMAS[name], name
        assert df["id"].n_unique() == df.height, f"{name} ids are unique"
    failures = read_table(result.index, "failures")
    assert failures.height == 0
    stats = json.loads(result.index.read_bytes("stats.json"))
    assert stats["total"]["calls"] > 0 and stats["rows"]["entities"] == tables["entities"].height
    assert json.loads(result.index.read_bytes("ledger.json"))["total"]["calls"] == stats["total"]["calls"]
    events = stats["steps"]["extract_graph"]["events"]  # what steps count through stat_update
    extracted = read_table(result.index, "entities")["frequency"].sum()
    assert events["entity_mentions"] >= extracted > 0 and events["gleaning_rounds"] == stats["rows"]["text_units"]
    assert "self_loops_dropped" in stats["steps"]["merge_graph"]["events"]


def test_graph_contents_make_sense(coffee):
    _, _, t = coffee
    titles = set(t["entities"]["title"].to_list())
    assert {"李明", "王芳", "张伟", "杭州"} <= titles
    li = t["entities"].filter(pl.col("title") == "李明").row(0, named=True)
    assert li["type"] == "PERSON" and li["frequency"] == 4  # he appears in all four documents
    assert t["text_units"].height == 4 and t["documents"]["text_unit_ids"].list.len().to_list() == [1, 1, 1, 1]
    # every entity's text units exist, and relationships join entities that exist
    units = set(t["text_units"]["id"].to_list())
    assert all(set(ids) <= units for ids in t["entities"]["text_unit_ids"].to_list())
    assert set(t["relationships"]["source"].to_list()) | set(t["relationships"]["target"].to_list()) <= titles
    # communities cover the related entities at level 0; one report per community
    comms, reports = t["communities"], t["community_reports"]
    level0 = comms.filter(pl.col("level") == 0)
    linked = {e for ids in level0["entity_ids"].to_list() for e in ids}
    assert len(linked) == sum(level0["size"].to_list())
    assert sorted(reports["community"].to_list()) == sorted(comms["community"].to_list())
    assert all(r.startswith("# ") and len(r) > 40 for r in reports["full_content"].to_list())


def test_vectors_in_lancedb(coffee):
    _, result, t = coffee
    counts = {name: open_vectors(result.index.child("lancedb"), name).count_rows() for name in VECTOR_TABLES}
    assert counts == {
        "entity_description": t["entities"].height,
        "text_unit_text": t["text_units"].height,
        "community_full_content": t["community_reports"].height,
    }


def test_second_run_is_identical_and_makes_no_calls(coffee, simulator):
    root, first, tables = coffee
    before = simulator.stats().get("ok", 0)
    second = build_index(root=root)
    assert simulator.stats().get("ok", 0) == before
    assert second.ledger.total().calls == 0 and second.ledger.total().cache_hits > 0
    for name in REQUIRED_TABLES:
        assert read_table(second.index, name).equals(tables[name]), name


def test_in_process_executor_builds_the_same_index(coffee, tmp_path, simulator):
    """workers.executor local (what `auto` picks for small inputs with no cluster): no Ray actors, same tables."""
    _, first, tables = coffee
    root = make_root(tmp_path / "local", simulator.base_url, workers={"executor": "local"})
    (root / "input").mkdir()
    shutil.copy(COFFEE, root / "input" / "coffee_shop.csv")
    before = simulator.stats().get("ok", 0)
    result = build_index(root=root)
    assert set(result.node_ids) == {"local"} and sum(result.node_ids.values()) > 0
    assert "local" not in first.node_ids, "the module's index ran on Ray actors"
    assert simulator.stats().get("ok", 0) - before == first.ledger.total().calls  # its own cache: paid again
    for name in REQUIRED_TABLES:  # (documents' creation_date is the input file's mtime: a fresh copy here)
        ours, theirs = read_table(result.index, name), tables[name]
        keep = [c for c in ours.columns if c != "creation_date"]
        assert ours.select(keep).equals(theirs.select(keep)), name


def test_auto_executor_runs_small_inputs_in_process_and_joins_a_running_ray(ray_session):
    from graphrag_ray.exec.runtime import choose_backend

    assert choose_backend("auto", 10_000, 1.0) == "ray"  # this session's Ray is running: join it
    assert choose_backend("local", 10**12, 1.0) == "local" and choose_backend("ray", 1, 1.0) == "ray"


def test_claims_when_enabled_land_in_covariates(tmp_path, simulator, ray_session):
    root = coffee_root(tmp_path / "claims", simulator.base_url)
    import yaml

    settings = yaml.safe_load((root / "settings.yaml").read_text())
    settings["extract_claims"] = {"enabled": True}
    (root / "settings.yaml").write_text(yaml.safe_dump(settings, allow_unicode=True))
    result = build_index(root=root)
    claims = read_table(result.index, "covariates")
    units = read_table(result.index, "text_units")
    assert claims is not None and claims.height > 0 and dict(claims.schema) == SCHEMAS["covariates"]
    assert set(claims["text_unit_id"].to_list()) <= set(units["id"].to_list())
    assert sum(units["covariate_ids"].list.len().to_list()) == claims.height
    assert result.stats["steps"]["extract_claims"]["ledger"]["total"]["calls"] > 0


def test_prompt_tune_writes_chinese_prompts_that_index_then_uses(tmp_path, simulator, ray_session):
    root = coffee_root(tmp_path / "tuned", simulator.base_url)
    dry = subprocess.run(
        [sys.executable, "-m", "graphrag_ray.cli", "prompt-tune", "--root", str(root), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dry.returncode == 0, dry.stderr
    assert "language: Chinese" in dry.stdout and not (root / "prompts").exists(), "a dry run writes nothing"
    out = subprocess.run(
        [sys.executable, "-m", "graphrag_ray.cli", "prompt-tune", "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    extraction = (root / "prompts" / "extract_graph.txt").read_text(encoding="utf-8")
    types = extraction.split("One of the following types: [", 1)[1].split("]", 1)[0].split(",")
    assert {"人物", "组织", "地点"} <= set(types), types  # the corpus's language; its own fourth type
    assert "-Domain-" in extraction and "中文" in extraction and "李明" in extraction, "domain and worked example"
    for name in ("summarize_descriptions.txt", "community_report.txt"):
        assert (root / "prompts" / name).read_text(encoding="utf-8").startswith("-Domain-\n")
    result = build_index(root=root)
    entities = read_table(result.index, "entities")
    assert result.stats["total"]["failures"] == 0 and "人物" in entities["type"].to_list()
