"""Ray Data in and out: an index built from a ray.data.Dataset's rows, its tables handed back as Datasets, on the
test session's local Ray."""

from __future__ import annotations

import shutil
from pathlib import Path

from graphrag_ray import api
from graphrag_ray.storage.tables import read_table

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "english"


def test_an_index_from_a_dataset_and_its_tables_as_datasets(tmp_path, ray_session, no_key):
    import ray

    root = tmp_path / "from_dataset"
    root.mkdir()
    shutil.copy(EXAMPLE / "settings.yaml", root / "settings.yaml")
    rows = [
        {"id": p.stem, "title": p.stem.replace("_", " ").title(), "text": p.read_text(encoding="utf-8"), "lang": "en"}
        for p in sorted((EXAMPLE / "input").iterdir())
    ]
    documents = ray.data.from_items(rows)
    built = api.build_index(root=root, method="fast", documents=documents)
    docs = read_table(built.index, "documents")
    assert sorted(docs["title"].to_list()) == sorted(r["title"] for r in rows)
    assert not (root / "input").exists(), "the Dataset was the input"
    tables = api.read_tables(root)
    assert {"documents", "text_units", "entities", "relationships", "communities", "community_reports"} <= set(tables)
    entities = tables["entities"]
    assert isinstance(entities, ray.data.Dataset)
    assert entities.count() == read_table(built.index, "entities").height > 0
    titles = {row["title"] for row in entities.take_all()}
    assert "MARIA LOPEZ" in titles
    # the same rows again, in another order: the same input, so the published index is of it already
    again = api.build_index(
        root=root, method="fast", documents=ray.data.from_items(list(reversed(rows))), skip_unchanged=True
    )
    assert again.stats.get("nothing_done") == "index unchanged"
