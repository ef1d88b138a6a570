"""One self-contained HTML file that shows the graph: vis-network (the copy the `pyvis` package ships) and the data
inline, nothing fetched from the network. Positions are computed here (igraph, seeded), so the page draws at once
with physics off; a large index shows its top entities by degree and finds the rest by search."""

from __future__ import annotations

import json
import random
from importlib import resources
from pathlib import Path

import igraph as ig
import polars as pl

from graphrag_ray.explore.graph import IndexGraph, level_column

VIS_VERSION = "vis-9.1.2"
DESCRIPTION_CHARS = 1500  # per entity in the page: enough to read, bounded for a large index
LAYOUT_SEED = 0
LAYOUT_SCALE = 1000.0  # vis-network coordinates: a layout about this wide suits its default zoom range


def _vis_files() -> tuple[str, str]:
    lib = resources.files("pyvis") / "lib" / VIS_VERSION
    return (lib / "vis-network.min.js").read_text(encoding="utf-8"), (lib / "vis-network.css").read_text(
        encoding="utf-8"
    )


def _layout(count: int, pairs: list[tuple[int, int]], weights: list[float]) -> list[tuple[float, float]]:
    """Fruchterman-Reingold from a fixed start (a circle), so the same index draws the same picture; isolated
    nodes and small components are packed around the large ones by igraph's grid-free layout."""
    if count == 0:
        return []
    g = ig.Graph(n=count, edges=pairs)
    start = ig.Graph.Ring(count).layout_circle().coords
    # igraph draws its random moves from Python's `random` module unless given a generator of its own
    ig.set_random_number_generator(random.Random(LAYOUT_SEED))
    try:
        coords = g.layout_fruchterman_reingold(weights=weights or None, seed=start, niter=300, grid="auto").coords
    finally:
        ig.set_random_number_generator(random)
    xs, ys = [c[0] for c in coords], [c[1] for c in coords]
    span = max(max(xs) - min(xs), max(ys) - min(ys), 1e-9)
    scale = LAYOUT_SCALE * max(1.0, (count / 300) ** 0.5) / span  # more nodes, more room
    return [(round((x - min(xs)) * scale, 1), round((y - min(ys)) * scale, 1)) for x, y in coords]


def view_data(graph: IndexGraph, level: int | None = None, max_nodes: int = 1500, max_communities: int = 300) -> dict:
    """What the page shows: every entity (for search; descriptions cut at DESCRIPTION_CHARS), the first
    `max_nodes` of them by degree drawn with their relationships, and every community's report."""
    chosen = graph.chosen_level(level)
    levels = graph.levels
    entities = (
        graph.nodes.sort(["degree", "title"], descending=[True, False])
        .with_row_index("i")
        .with_columns(pl.col("i").cast(pl.Int64))
    )
    shown = min(max_nodes, entities.height)
    index_of = dict(zip(entities["id"].to_list(), entities["i"].to_list()))
    edges = (
        graph.edges.select(
            pl.col("source_id").replace_strict(index_of).alias("a"),
            pl.col("target_id").replace_strict(index_of).alias("b"),
            pl.col("weight").fill_null(1.0).round(2),
            pl.col("description").fill_null("").str.slice(0, 400),
        )
        .filter((pl.col("a") < shown) & (pl.col("b") < shown))
        .sort(["weight", "a", "b"], descending=[True, False, False])
    )
    coords = _layout(shown, list(zip(edges["a"].to_list(), edges["b"].to_list())), edges["weight"].to_list())
    level_columns = [level_column(lv) for lv in levels]
    rows = []
    for row in entities.iter_rows(named=True):
        item = {
            "i": row["i"],
            "title": row["title"],
            "type": row["type"] or "",
            "degree": row["degree"],
            "description": (row["description"] or "")[:DESCRIPTION_CHARS],
            "communities": [row[c] for c in level_columns],
        }
        if row["i"] < shown:
            item["x"], item["y"] = coords[row["i"]]
        rows.append(item)
    reports = {r["community"]: r for r in graph.reports.iter_rows(named=True)}
    communities = []
    for c in graph.communities.iter_rows(named=True):
        report = reports.get(c["community"], {})
        communities.append(
            {
                "community": c["community"],
                "level": c["level"],
                "size": c["size"],
                "title": report.get("title") or c["title"],
                "report_title": report.get("title") or "",
                "summary": report.get("summary") or "",
                "rank": report.get("rank") or 0.0,
                "findings": report.get("findings") or [],
            }
        )
    return {
        "title": graph.name,
        "level": chosen,
        "levels": levels,
        "shown": shown,
        "total_entities": entities.height,
        "total_relationships": graph.edges.height,
        "total_communities": graph.communities.height,
        "max_communities": max_communities,
        "entities": rows,
        "edges": edges.rows(),
        "communities": communities,
    }


def _inline_json(data: dict) -> str:
    """JSON that cannot end or change its <script> element: every <, > and & as a \\u escape (a `</script>` would
    end it, and a `<!--<script>` puts the HTML parser in the double-escaped state, where the real `</script>` no
    longer ends it and the page never draws)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for char, escape in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escape)
    return text


def write_view(graph: IndexGraph, out: Path, level: int | None = None, max_nodes: int = 1500) -> Path:
    page = (resources.files("graphrag_ray.explore") / "view.html").read_text(encoding="utf-8")
    vis_js, vis_css = _vis_files()
    # Placeholders are replaced last-to-first by plain splitting, so no inserted text is ever searched again.
    head, rest = page.split("/*__VIS_CSS__*/")
    middle, rest = rest.split("/*__VIS_JS__*/")
    before_data, tail = rest.split("/*__DATA__*/")
    html = "".join(
        [
            head,
            vis_css,
            middle,
            vis_js.replace("</script", "<\\/script"),
            before_data,
            _inline_json(view_data(graph, level, max_nodes)),
            tail,
        ]
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    return out
