"""export / view / report on an index with entities but no relationships, hence no communities (a tiny corpus):
every format is written and says "no community" instead of failing on a level that does not exist."""

from __future__ import annotations

import json

import polars as pl
import pytest

from graphrag_ray.errors import UsageError
from graphrag_ray.explore.export import FORMATS, export_graph
from graphrag_ray.explore.graph import NO_COMMUNITY, IndexGraph
from graphrag_ray.explore.report import write_index_report
from graphrag_ray.explore.view import write_view
from graphrag_ray.storage.location import Store
from graphrag_ray.storage.schemas import empty


@pytest.fixture()
def lonely(tmp_path) -> IndexGraph:
    nodes = pl.DataFrame(
        {
            "id": ["e1", "e2"],
            "human_readable_id": [0, 1],
            "title": ["李明", "杭州"],
            "type": ["PERSON", "GEO"],
            "description": ["开店", "城市"],
            "frequency": [1, 1],
            "degree": [0, 0],
        }
    )
    edges = empty("relationships").with_columns(
        pl.lit(None, pl.String).alias("source_id"), pl.lit(None, pl.String).alias("target_id")
    )
    return IndexGraph(Store(tmp_path / "index"), nodes, edges, empty("communities"), empty("community_reports"), [])


def test_an_index_without_communities_exports_views_and_reports(lonely, tmp_path):
    for fmt in FORMATS:
        assert export_graph(lonely, fmt, tmp_path / fmt)
    header, *rows = (tmp_path / "csv" / "nodes.csv").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 2 and all(
        row.split(",")[header.split(",").index("community")] == str(NO_COMMUNITY) for row in rows
    )
    html = write_view(lonely, tmp_path / "g.html").read_text(encoding="utf-8")
    data = json.loads(html.split('id="graph-data">', 1)[1].split("</script>", 1)[0])
    assert data["level"] is None and data["levels"] == [] and len(data["entities"]) == 2
    report = write_index_report(lonely, tmp_path / "report", []).read_text(encoding="utf-8")
    assert "0 communities on 0 levels" in report
    assert export_graph(lonely, "csv", tmp_path / "x", level=1)  # no levels: every node in NO_COMMUNITY
    with pytest.raises(UsageError, match="--level -1"):
        export_graph(lonely, "csv", tmp_path / "x", level=-1)
