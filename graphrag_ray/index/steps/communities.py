"""Hierarchical Leiden communities (igraph + leidenalg, modularity, fixed seed).

Level 0 partitions every connected component, not only the largest, each on its own (as every later level
partitions each community on its own): a component's communities depend on that component alone, so a change in
one part of the graph leaves the communities of the others exactly as they were (what `update` relies on). A
community larger than `max_cluster_size` is partitioned again into children at the next level, until communities
are small enough, cannot be split, or `max_levels` is reached. Entities with no relationship are in no community
(as in Microsoft GraphRAG). Numbering is deterministic: by level, then by each community's first title. When the
index is updated, each level's search starts from the previous version's partition (leidenalg's
`initial_membership`) and the entities the change did not reach (same neighbours, same weights) keep their community
(`is_membership_fixed`): only what changed moves, so the rest keeps its communities and reports; a community that
exists in the previous version (same level and members) keeps its number, and so does one that shares most of its
members with a previous community of its level and most of that one's (it changed: a deleted document took a member
away); new ones are numbered after the previous ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from graphrag_ray.exec.step import BatchStep, StepContext, Tables
from graphrag_ray.ids import content_id
from graphrag_ray.index.carry import carried_community_numbers

if TYPE_CHECKING:
    import igraph


def leiden(
    graph: igraph.Graph, seed: int, start: dict[str, object] | None = None, settled: set[str] | None = None
) -> list[list[int]]:
    """Modularity-optimising Leiden; returns vertex index groups. `start` (vertex name -> a previous community)
    seeds the search with the previous partition (vertices it does not name start alone); vertices in `settled`
    (the change did not reach them: same neighbours, same weights) keep their previous community and only the
    others move - so where the graph did not change, the partition is exactly as it was."""
    import leidenalg  # with igraph, imported by the step that clusters: no other process needs them

    if not start:
        partition = leidenalg.find_partition(
            graph, leidenalg.ModularityVertexPartition, weights="weight", seed=seed, n_iterations=2
        )
        return [list(c) for c in partition if c]
    labels: dict[object, int] = {}
    names = graph.vs["name"]
    initial = [labels.setdefault(start.get(name, ("new", name)), len(labels)) for name in names]
    partition = leidenalg.ModularityVertexPartition(graph, initial_membership=initial, weights="weight")
    optimiser = leidenalg.Optimiser()
    optimiser.set_rng_seed(seed)
    fixed = [name in start and name in (settled or set()) for name in names]
    optimiser.optimise_partition(partition, n_iterations=2, is_membership_fixed=fixed if any(fixed) else None)
    return [list(c) for c in partition if c]


def hierarchical_leiden(
    graph: igraph.Graph,
    max_size: int,
    seed: int,
    max_levels: int,
    previous: dict[int, dict[str, int]] | None = None,
    settled: set[str] | None = None,
) -> list[dict]:
    """[{level, parent (the parent's dict or None), members: [sorted vertex names]}]. `previous` (level -> vertex
    name -> community) seeds each level's search with the previous version's partition, in which the `settled`
    vertices stay."""
    result: list[dict] = []
    frontier: list[tuple[dict | None, igraph.Graph]] = [
        (None, graph.induced_subgraph(sorted(component))) for component in graph.connected_components()
    ]
    for level in range(max_levels):
        next_frontier = []
        start = (previous or {}).get(level)
        for parent, sub in frontier:
            if sub.vcount() <= 2:  # a pair (or a vertex) is one community: no search needed
                groups = [list(range(sub.vcount()))]
            else:
                groups = leiden(sub, seed, start, settled) if sub.ecount() else [[v.index] for v in sub.vs]
            if parent is not None and len(groups) <= 1:
                continue  # cannot be split further: the parent stays a leaf
            named = sorted((sorted(sub.vs[i]["name"] for i in g) for g in groups), key=lambda m: m[0])
            for members in named:
                node = {"level": level, "parent": parent, "members": members}
                result.append(node)
                if len(members) > max_size:
                    next_frontier.append((node, graph.induced_subgraph([graph.vs.find(name=n).index for n in members])))
        if not next_frontier:
            break
        frontier = next_frontier
    return result


def settled_vertices(
    previous_rels: pl.DataFrame | None, previous_ents: pl.DataFrame | None, pairs: pl.DataFrame, ents: pl.DataFrame
) -> set[str]:
    """The entity keys the change did not reach: in the previous version, with exactly the same weighted edges."""
    if previous_rels is None or previous_ents is None:
        return set()
    key_of = dict(zip(ents["id"].to_list(), ents["key"].to_list()))
    old_key = {
        title: key_of.get(entity_id)
        for title, entity_id in zip(previous_ents["title"].to_list(), previous_ents["id"].to_list())
    }
    before: dict[tuple, float] = {}
    for s, t, w in zip(
        previous_rels["source"].to_list(), previous_rels["target"].to_list(), previous_rels["weight"].to_list()
    ):
        a, b = old_key.get(s) or ("gone", s), old_key.get(t) or ("gone", t)
        pair = (min(a, b, key=str), max(a, b, key=str))
        before[pair] = before.get(pair, 0.0) + w
    now = {(a, b): w for a, b, w in zip(pairs["a"].to_list(), pairs["b"].to_list(), pairs["weight"].to_list())}
    touched = {v for pair in set(before) ^ set(now) for v in pair}
    touched |= {v for pair in set(before) & set(now) if abs(before[pair] - now[pair]) > 1e-9 for v in pair}
    existed = {key for key in old_key.values() if key is not None}
    return {key for key in ents["key"].to_list() if key in existed and key not in touched}


def previous_partition(previous: pl.DataFrame | None, ents: pl.DataFrame) -> dict[int, dict[str, int]] | None:
    """level -> entity key -> the community it was in, from the version being updated."""
    if previous is None or not previous.height:
        return None
    key_of = dict(zip(ents["id"].to_list(), ents["key"].to_list()))
    levels: dict[int, dict[str, int]] = {}
    for row in previous.select("level", "community", "entity_ids").iter_rows(named=True):
        at = levels.setdefault(row["level"], {})
        for entity_id in row["entity_ids"]:
            if entity_id in key_of:
                at[key_of[entity_id]] = row["community"]
    return levels


class Communities(BatchStep):
    name = "communities"
    settings_section = "cluster_graph"
    # the graph's shape, not its descriptions: Leiden runs beside the description summaries (a background step;
    # the reports step waits for it), off the path every run takes
    reads = ("resolved_entities", "resolved_relationships", "documents")
    read_columns = {"documents": ("creation_date",)}  # the latest is the communities' period
    writes = ("communities",)
    background = True
    slow_imports = ("igraph", "leidenalg")

    def run(self, ctx: StepContext, tables: Tables) -> Tables:
        cfg = ctx.settings.cluster_graph
        ents = tables["resolved_entities"]
        rels = tables["resolved_relationships"]
        pairs = (
            rels.select(
                pl.min_horizontal("skey", "tkey").alias("a"), pl.max_horizontal("skey", "tkey").alias("b"), "weight"
            )
            .group_by("a", "b")
            .agg(pl.col("weight").sum())
            .sort("a", "b")
        )
        names = sorted(set(pairs["a"].to_list()) | set(pairs["b"].to_list()))
        import igraph

        graph = igraph.Graph()
        graph.add_vertices(names)
        graph.add_edges(list(zip(pairs["a"].to_list(), pairs["b"].to_list())))
        graph.es["weight"] = [max(1e-6, float(w)) for w in pairs["weight"].to_list()]
        previous = ctx.previous_table("communities")
        settled = (
            settled_vertices(ctx.previous_table("relationships"), ctx.previous_table("entities"), pairs, ents)
            if previous is not None
            else set()
        )
        tree = (
            hierarchical_leiden(
                graph, cfg.max_cluster_size, cfg.seed, cfg.max_levels, previous_partition(previous, ents), settled
            )
            if names
            else []
        )
        tree.sort(key=lambda c: (c["level"], c["members"][0]))
        return {"communities": self._table(tree, ents, rels, tables["documents"], previous)}

    def _table(self, tree, ents, rels, docs, previous: pl.DataFrame | None) -> pl.DataFrame:
        ids = [content_id("community", c["level"], *sorted(c["members"])) for c in tree]
        key_to_id = dict(zip(ents["key"].to_list(), ents["id"].to_list()))
        numbers = carried_community_numbers(
            ids, [c["level"] for c in tree], [[key_to_id[m] for m in c["members"]] for c in tree], previous
        )
        number_of = {id(c): n for c, n in zip(tree, numbers)}
        key_units = dict(zip(ents["key"].to_list(), ents["text_unit_ids"].to_list()))
        rel_rows = list(
            zip(rels["skey"].to_list(), rels["tkey"].to_list(), rels["id"].to_list(), rels["text_unit_ids"].to_list())
        )
        period = (docs["creation_date"].max() or "")[:10] if docs.height else ""
        # the relationships inside each community: an entity is in one community per level, so one pass over the
        # relationships per level finds them all (testing every relationship against every community was
        # 5k x 59k tests at 10M tokens, most of the step's wall)
        community_at: dict[int, dict[str, int]] = {}
        for i, community in enumerate(tree):
            for member in community["members"]:
                community_at.setdefault(community["level"], {})[member] = i
        inside_of: dict[int, list] = {}
        for at in community_at.values():
            for s, t, rid, units in rel_rows:
                i = at.get(s)
                if i is not None and i == at.get(t):
                    inside_of.setdefault(i, []).append((rid, units))
        rows = []
        for i, (community, community_id, number) in enumerate(zip(tree, ids, numbers)):
            members = community["members"]
            inside = inside_of.get(i, [])
            units = sorted({u for _, us in inside for u in us} or {u for m in members for u in key_units[m]})
            rows.append(
                {
                    "id": community_id,
                    "human_readable_id": number,
                    "community": number,
                    "level": community["level"],
                    "parent": number_of[id(community["parent"])] if community["parent"] else -1,
                    "children": [],
                    "title": f"Community {number}",
                    "entity_ids": sorted(key_to_id[m] for m in members),
                    "relationship_ids": sorted(rid for rid, _ in inside),
                    "text_unit_ids": units,
                    "period": period,
                    "size": len(members),
                }
            )
        by_number = {r["community"]: r for r in rows}
        for r in rows:
            if r["parent"] >= 0:
                by_number[r["parent"]]["children"].append(r["community"])
        schema = {
            "id": pl.String,
            "human_readable_id": pl.Int64,
            "community": pl.Int64,
            "level": pl.Int64,
            "parent": pl.Int64,
            "children": pl.List(pl.Int64),
            "title": pl.String,
            "entity_ids": pl.List(pl.String),
            "relationship_ids": pl.List(pl.String),
            "text_unit_ids": pl.List(pl.String),
            "period": pl.String,
            "size": pl.Int64,
        }
        return pl.DataFrame(rows, schema=schema).sort("community")


STEP = Communities()
