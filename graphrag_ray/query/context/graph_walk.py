"""Text units ranked by personalised PageRank, as HippoRAG and fast-graphrag rank passages.

One graph of entities and text units: an edge per relationship (its weight) and one between an entity and each text
unit it is in. The walk restarts at the question's entities (by rarity) - or, for a question naming none, at the
text units BM25 finds for it; a passage one hop away - the film's director's page, reached through the director's
name in the film's page - gets the mass that flows there. The walk runs on the seeds' neighbourhood, by power
iteration in numpy: a query command does not import igraph (a second, cold) for it.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from graphrag_ray.query.context.entity_match import GENERIC_SHARE

# 0.6 of the walk follows edges (HippoRAG's 0.5 restarted more), so mass stays within a few hops of the question
DAMPING = 0.6
HOPS = 3  # the walk runs on the seeds' neighbourhood: entity -> its passage -> a name in it -> that
MAX_NODES = 5_000  # name's passage; mass further out is negligible at this damping, and a query must not pay
HUB_DEGREE = 500  # for the whole graph. A hub is reached, not walked through
MEMBERSHIP = 5.0  # weight of an entity - text unit edge, against a relationship's (scaled to a mean of 1):
# the walk is after passages, and in the fast method's graph a relationship only repeats that two share one
ITERATIONS, TOLERANCE = 100, 1e-10
# a text unit's score is divided by (its edges) ** UNIT_DEGREE_POWER: a long page naming fifty things collects mass
# from all of them without being about any. jobs/bench_retrieval.py, the standard method on 2Wiki (0.92/0.90 ->
# 0.94/0.92, with DAMPING 0.6); the fast method's 0.96/0.93 and Medical's recall unchanged
UNIT_DEGREE_POWER = 0.25
# the walk localises only where a passage shares its names with few others. In a corpus of long chunks of one subject
# (GraphRAG-Bench Medical: 199 text units of 1,200 tokens, 27 names each) the median passage shares a name with 56 %
# of the others, and a walk from any name spreads over the whole corpus; on 2Wiki's pages (100 tokens), under 3 %.
# Where the median passage shares names with more than LOCAL_MAX_SHARE of the text units, the names lead no walk
# (query/context/local_context.py). Judged on a sample of SAMPLE_UNITS text units, and only in a corpus of at least
# LOCAL_MIN_UNITS: in a small one every passage is near every other. jobs/bench_retrieval.py: Medical local search
# 0.663 -> 0.668 (basic search's 0.668: there its Sources are basic's), 2Wiki 0.96/0.94 for both methods unchanged
LOCAL_MAX_SHARE = 0.25
LOCAL_MIN_UNITS = 100
SAMPLE_UNITS = 256


class GraphWalk:
    """Built once per loaded index (IndexData.graph_walk); `scores` is one PageRank."""

    def __init__(self, entities, relationships, text_units):
        self.entity_ids = entities["id"].to_list()
        self.unit_ids = text_units["id"].to_list()
        self._entities, self._relationships = entities, relationships

    @cached_property
    def _edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(indptr, neighbour, weight): both directions of every edge, grouped by node (CSR)."""
        by_title = dict(zip(self._entities["title"].to_list(), range(len(self.entity_ids))))
        entities, units = self._positions
        a, b, w = [], [], []
        for source, target, weight in zip(
            self._relationships["source"].to_list(),
            self._relationships["target"].to_list(),
            self._relationships["weight"].to_list(),
        ):
            i, j = by_title.get(source), by_title.get(target)
            if i is not None and j is not None and i != j:
                a.append(i)
                b.append(j)
                w.append(float(weight or 1.0))
        links = len(w)
        mean = (sum(w) / links or 1.0) if links else 1.0  # relationships scaled to a mean of 1
        w = [x / mean for x in w]
        for entity_id, members in zip(self.entity_ids, self._entities["text_unit_ids"].to_list()):
            for unit in members or ():
                if unit in units:
                    a.append(entities[entity_id])
                    b.append(units[unit])
                    w.append(MEMBERSHIP)
        src = np.asarray(a + b, dtype=np.int64)
        dst = np.asarray(b + a, dtype=np.int64)
        weight = np.asarray(w + w, dtype=np.float64)
        order = np.argsort(src, kind="stable")
        nodes = len(self.entity_ids) + len(self.unit_ids)
        indptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=nodes))])
        return indptr, dst[order], weight[order]

    @cached_property
    def localises(self) -> bool:
        """Whether a walk from a name stays near it: the median text unit (of an evenly spaced sample) shares an
        entity with at most LOCAL_MAX_SHARE of the other text units. Hubs and names on most text units (generic:
        query/context/entity_match.py) do not count: the one is not walked through, the other never seeds a walk."""
        units = len(self.unit_ids)
        if units < LOCAL_MIN_UNITS:
            return True
        indptr, neighbour, _ = self._edges
        offset, degree = len(self.entity_ids), np.diff(indptr)
        in_units = np.bincount(np.repeat(np.arange(len(degree)), degree), weights=neighbour >= offset)
        linking = (degree <= HUB_DEGREE) & (in_units <= GENERIC_SHARE * units)
        shares = []
        for unit in np.unique(np.linspace(0, units - 1, SAMPLE_UNITS).astype(np.int64)) + offset:
            names = neighbour[indptr[unit] : indptr[unit + 1]]
            names = names[(names < offset) & linking[names]]
            near = neighbour[edge_positions(indptr, names)[0]]
            shares.append((len(np.unique(near[near >= offset])) - 1) / (units - 1))
        return float(np.median(shares)) <= LOCAL_MAX_SHARE

    @cached_property
    def _positions(self) -> tuple[dict[str, int], dict[str, int]]:
        """The node of each entity id, and of each text unit id (after the entities)."""
        return (
            {e: i for i, e in enumerate(self.entity_ids)},
            {u: len(self.entity_ids) + i for i, u in enumerate(self.unit_ids)},
        )

    def scores(self, entity_seeds: dict[str, float], unit_seeds: dict[str, float]) -> list[tuple[str, float]]:
        """(text unit id, PageRank) from the seeds, best first (ties: table order); none without seeds."""
        offset = len(self.entity_ids)
        entities, units = self._positions
        seeds: dict[int, float] = {}
        for node, weight in [
            *((entities.get(e), w) for e, w in entity_seeds.items()),
            *((units.get(u), w) for u, w in unit_seeds.items()),
        ]:
            if node is not None and weight > 0:
                seeds[node] = seeds.get(node, 0.0) + weight
        if not seeds:
            return []
        seed_nodes = np.asarray(sorted(seeds), dtype=np.int64)
        nodes = self._around(seed_nodes)
        reset = np.zeros(len(nodes))
        reset[np.searchsorted(nodes, seed_nodes)] = [seeds[int(n)] for n in seed_nodes]
        scores = self._pagerank(nodes, reset / reset.sum())
        unit = (nodes >= offset) & (scores > 0)
        nodes, scores = nodes[unit], scores[unit]
        if UNIT_DEGREE_POWER:
            indptr = self._edges[0]
            degree = (indptr[nodes + 1] - indptr[nodes]).astype(np.float64)
            scores = scores / np.maximum(degree, 1.0) ** UNIT_DEGREE_POWER
        order = np.lexsort((nodes, -scores))  # best first; ties: table order
        return [
            (self.unit_ids[node - offset], score)
            for node, score in zip((nodes[order]).tolist(), scores[order].tolist())
        ]

    def _pagerank(self, nodes: np.ndarray, reset: np.ndarray) -> np.ndarray:
        """Personalised PageRank on the subgraph of `nodes` (sorted): the walk moves along an edge in proportion
        to its weight, or restarts at `reset` (always, from a node with no edge inside)."""
        indptr, neighbour, weight = self._edges
        local = np.full(len(indptr) - 1, -1, dtype=np.int64)
        local[nodes] = np.arange(len(nodes))
        take, counts = edge_positions(indptr, nodes)
        src = np.repeat(np.arange(len(nodes)), counts)
        dst, w = local[neighbour[take]], weight[take]
        inside = dst >= 0
        src, dst, w = src[inside], dst[inside], w[inside]
        out = np.bincount(src, weights=w, minlength=len(nodes))
        step = np.divide(w, out[src], out=np.zeros_like(w), where=out[src] > 0)
        dangling = out == 0
        x = reset.copy()
        for _ in range(ITERATIONS):
            moved = np.bincount(dst, weights=x[src] * step, minlength=len(nodes))
            following = DAMPING * moved + (1 - DAMPING + DAMPING * x[dangling].sum()) * reset
            if np.abs(following - x).sum() < TOLERANCE:
                return following
            x = following
        return x

    def _around(self, seeds: np.ndarray) -> np.ndarray:
        """The nodes within HOPS of the seeds (sorted), not expanding past hubs, at most about MAX_NODES."""
        indptr, neighbour, _ = self._edges
        seen = np.zeros(len(indptr) - 1, dtype=bool)
        seen[seeds] = True
        frontier, total = seeds, len(seeds)
        for hop in range(HOPS):
            if hop:  # a hub is reached, not walked through (a seed always is)
                frontier = frontier[indptr[frontier + 1] - indptr[frontier] <= HUB_DEGREE]
            reached = np.unique(neighbour[edge_positions(indptr, frontier)[0]])
            frontier = reached[~seen[reached]]
            seen[frontier] = True
            total += len(frontier)
            if total > MAX_NODES:
                break
        return np.flatnonzero(seen)


def edge_positions(indptr: np.ndarray, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(where the edges of `nodes` are in a CSR graph's arrays, node after node; how many each has)."""
    starts, counts = indptr[nodes], indptr[nodes + 1] - indptr[nodes]
    return np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(counts.sum()), counts
