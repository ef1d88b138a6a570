"""The graph in the formats graph tools read: GraphML and GEXF (Gephi, Cytoscape, yEd, networkx, igraph), plain
CSV, and Neo4j's bulk-import CSV with the `neo4j-admin database import` command line that loads it."""

from __future__ import annotations

import shlex
from pathlib import Path

import polars as pl

from graphrag_ray.errors import ConfigError
from graphrag_ray.explore.graph import IndexGraph, level_column

FORMATS = ("graphml", "gexf", "csv", "neo4j")
NODE_FIELDS = ("id", "human_readable_id", "title", "type", "description", "degree", "frequency")
EDGE_FIELDS = ("id", "human_readable_id", "source", "target", "description", "weight", "combined_degree")
REPORT_FIELDS = ("title", "summary", "rank")


def check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format '{fmt}' (one of: {', '.join(FORMATS)})")


def export_graph(graph: IndexGraph, fmt: str, out: Path, level: int | None = None) -> list[Path]:
    """Write `graph` as `fmt` into the folder `out`; the files written. Every node carries its community at each
    level, and `community` = the one at `level` (default: the top level, 0)."""
    check_format(fmt)
    community = graph.community_at(level)
    out.mkdir(parents=True, exist_ok=True)
    nodes = graph.nodes.select(*NODE_FIELDS, community.alias("community"), *(level_column(lv) for lv in graph.levels))
    nodes = nodes.with_columns(pl.col(pl.String).fill_null(""), pl.col(pl.Int64).fill_null(0))
    edges = graph.edges.select("source_id", "target_id", *EDGE_FIELDS).with_columns(
        pl.col(pl.String).fill_null(""), pl.col("weight").fill_null(1.0)
    )
    if fmt in ("graphml", "gexf"):
        return [_networkx_file(xml_legal(nodes), xml_legal(edges), fmt, out / f"graph.{fmt}")]
    if fmt == "csv":
        return _plain_csv(graph, nodes, edges, out)
    return _neo4j(graph, nodes, edges, out)


# characters XML 1.0 cannot hold, even escaped (C0 controls but tab, newline, carriage return; U+FFFE, U+FFFF): a
# description with one makes the whole file not well-formed, and Gephi or networkx refuse it. DEL and the C1
# controls, which XML 1.0 discourages and XML 1.1 restricts, go too.
XML_ILLEGAL = r"[\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x9F\x{FFFE}\x{FFFF}]"


def xml_legal(df: pl.DataFrame) -> pl.DataFrame:
    """Every text column with XML's illegal characters dropped (a node's title too: its edges are cleaned alike)."""
    return df.with_columns(pl.col(pl.String).str.replace_all(XML_ILLEGAL, ""))


def _networkx_file(nodes: pl.DataFrame, edges: pl.DataFrame, fmt: str, path: Path) -> Path:
    import networkx as nx

    # Nodes are keyed by title, as Microsoft GraphRAG's GraphML snapshot keys them; the entity id is an attribute.
    # A pair can have a relationship each way: every row of the table is an edge, so a pair named twice needs a
    # multigraph (GraphML writes its keys as edge ids). GEXF only then: networkx writes a multigraph's edge keys
    # there as a `networkx_key` attribute, a column Gephi would show on every edge.
    pairs = edges.select(
        pl.min_horizontal("source", "target").alias("a"), pl.max_horizontal("source", "target").alias("b")
    )
    multi = fmt == "graphml" or bool(pairs.is_duplicated().any())
    g = nx.MultiGraph() if multi else nx.Graph()
    for row in nodes.rename({"id": "entity_id"}).iter_rows(named=True):
        g.add_node(row["title"], **row)
    for row in edges.drop("source_id", "target_id").rename({"id": "relationship_id"}).iter_rows(named=True):
        if multi:
            g.add_edge(row["source"], row["target"], key=row["relationship_id"], **row)
        else:
            g.add_edge(row["source"], row["target"], id=row["relationship_id"], **row)
    writer = nx.write_graphml if fmt == "graphml" else nx.write_gexf
    writer(g, path)
    return path


def _community_rows(graph: IndexGraph) -> pl.DataFrame:
    reports = graph.reports.select("community", *REPORT_FIELDS)
    return (
        graph.communities.select("id", "community", "level", "parent", "title", "size")
        .rename({"title": "name"})
        .join(reports.rename({"title": "report_title"}), on="community", how="left")
        .with_columns(pl.col(pl.String).fill_null(""), pl.col("rank").fill_null(0.0))
    )


def _plain_csv(graph: IndexGraph, nodes: pl.DataFrame, edges: pl.DataFrame, out: Path) -> list[Path]:
    written = {
        "nodes.csv": nodes,
        "edges.csv": edges.drop("source_id", "target_id")
        .rename({"source": "source_title", "target": "target_title"})
        .with_columns(edges["source_id"].alias("source"), edges["target_id"].alias("target")),
        "communities.csv": _community_rows(graph),
    }
    for name, df in written.items():
        df.write_csv(out / name)
    return [out / name for name in written]


def _neo4j(graph: IndexGraph, nodes: pl.DataFrame, edges: pl.DataFrame, out: Path) -> list[Path]:
    """Header rows in the import tool's format (`name:ID(Group)`, `:START_ID(Group)`, typed `:int`/`:float`);
    labels and relationship types come from the command line (`--nodes=Entity=...`)."""
    typed = {"Int64": "int", "Float64": "float"}

    def header(df: pl.DataFrame, names: dict[str, str]) -> pl.DataFrame:
        return df.rename(
            {c: names.get(c) or (f"{c}:{typed[str(t)]}" if str(t) in typed else c) for c, t in df.schema.items()}
        )

    communities = _community_rows(graph).with_columns(pl.col("community").cast(pl.String))
    members = (
        graph.nodes.select("id", *(level_column(lv) for lv in graph.levels))
        .unpivot(index="id", value_name="community")
        .filter(pl.col("community") >= 0)
        .select(pl.col("id"), pl.col("community").cast(pl.String))
        .sort("id", "community")
    )
    parents = communities.filter(pl.col("parent") >= 0).select("community", pl.col("parent").cast(pl.String))
    files = {
        "entities.csv": header(nodes, {"id": "entityId:ID(Entity)"}),
        "communities.csv": header(communities.drop("id"), {"community": "communityId:ID(Community)"}),
        "relationships.csv": header(
            edges.drop("source", "target", "id"), {"source_id": ":START_ID(Entity)", "target_id": ":END_ID(Entity)"}
        ),
        "in_community.csv": header(members, {"id": ":START_ID(Entity)", "community": ":END_ID(Community)"}),
        "child_of.csv": header(parents, {"community": ":START_ID(Community)", "parent": ":END_ID(Community)"}),
    }
    for name, df in files.items():
        df.write_csv(out / name)
    command = [
        "neo4j-admin",
        "database",
        "import",
        "full",
        "neo4j",
        "--overwrite-destination",
        "--multiline-fields=true",
        f"--nodes=Entity={out / 'entities.csv'}",
        f"--nodes=Community={out / 'communities.csv'}",
        f"--relationships=RELATED={out / 'relationships.csv'}",
        f"--relationships=IN_COMMUNITY={out / 'in_community.csv'}",
        f"--relationships=CHILD_OF={out / 'child_of.csv'}",
    ]
    script = out / "import.sh"
    script.write_text(
        "#!/usr/bin/env bash\n# Load this graph into a stopped Neo4j 5 (database 'neo4j'; it is "
        "replaced). Run from NEO4J_HOME.\nset -euo pipefail\nbin/" + shlex.join(command) + "\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return [out / name for name in files] + [script]
