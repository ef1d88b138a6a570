"""Optional: Microsoft GraphRAG's query-side readers load our tables.

Runs where `graphrag` (3.x) is importable, or where GRAPHRAG_REFERENCE_PYTHON names a Python that has it
(its pins clash with ours, so it lives in its own venv); skipped otherwise.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphrag_ray.api import build_index
from tests.integration.test_index import coffee_root

READER = r"""
import sys, pandas as pd
from graphrag.query.indexer_adapters import (read_indexer_entities, read_indexer_relationships,
    read_indexer_reports, read_indexer_text_units, read_indexer_communities)
out = sys.argv[1]
t = {n: pd.read_parquet(f"{out}/{n}.parquet") for n in
     ["entities", "communities", "community_reports", "relationships", "text_units"]}
entities = read_indexer_entities(t["entities"], t["communities"], community_level=2)
reports = read_indexer_reports(t["community_reports"], t["communities"], community_level=2)
relationships = read_indexer_relationships(t["relationships"])
units = read_indexer_text_units(t["text_units"])
communities = read_indexer_communities(t["communities"], t["community_reports"])
assert entities and reports and relationships and units and communities
assert any(e.title == "李明" for e in entities)
print(f"OK entities={len(entities)} relationships={len(relationships)} reports={len(reports)} "
      f"text_units={len(units)} communities={len(communities)}")
"""


def reference_python() -> str | None:
    if importlib.util.find_spec("graphrag") is not None:
        return sys.executable
    candidate = os.environ.get("GRAPHRAG_REFERENCE_PYTHON")
    return candidate if candidate and Path(candidate).exists() else None


@pytest.mark.skipif(reference_python() is None, reason="Microsoft GraphRAG is not installed (optional)")
def test_microsoft_graphrag_readers_load_our_index(tmp_path, simulator, ray_session):
    result = build_index(root=coffee_root(tmp_path / "coffee", simulator.base_url))
    done = subprocess.run(
        [reference_python(), "-c", READER, str(result.index.local_path())], capture_output=True, text=True, timeout=300
    )
    print(done.stdout, done.stderr[-2000:])
    assert done.returncode == 0 and done.stdout.startswith("OK")
