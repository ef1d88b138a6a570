"""Text units ranked by personalised PageRank, as HippoRAG and fast-graphrag rank passages.

One graph of entities and text units: an edge per relationship (its weight) and one between an entity and each text
unit it is in. The walk restarts at the question's entities (by rarity) - or, for a question naming none, at the
text units BM25 finds for it; a passage one hop away - the film's director's page, reached through the director's
name in the film's page - gets the mass that flows there. The walk runs on the seeds' neighbourhood, by power
iteration in numpy: a query command does not import igraph (a second, cold) for it.
"""

from __future__ import annotations

from functools import cached_property
from typing import NamedTuple

import numpy as np
import polars as pl

from graphrag_ray.config.ranking import RankingConfig

# every constant of the walk is a setting: local_search.ranking (config/ranking.py), with its provenance


class Reach(NamedTuple):
    """How far a question's names reach (GraphWalk.reach): other text units, and the tokens they hold."""

    passages: int
    tokens: float


class GraphWalk:
    """Built once per loaded index (IndexData.graph_walk); `scores` is one PageRank."""

    def __init__(self, entities, relationships, text_units):
        self.entity_ids = entities["id"].to_list()
        self.unit_ids = text_units["id"].to_list()
        self._entities, self._relationships, self._text_units = entities, relationships, text_units

    @cached_property
    def _edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(indptr, neighbour, weight): both directions of every edge, grouped by node (CSR). A membership edge
        (entity - text unit) has weight -1 here: `weights` gives it the ranking's membership weight."""
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
                    w.append(-1.0)
        src = np.asarray(a + b, dtype=np.int64)
        dst = np.asarray(b + a, dtype=np.int64)
        weight = np.asarray(w + w, dtype=np.float64)
        order = np.argsort(src, kind="stable")
        nodes = len(self.entity_ids) + len(self.unit_ids)
        indptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=nodes))])
        return indptr, dst[order], weight[order]

    @cached_property
    def _unit_tokens(self) -> np.ndarray:
        """How much text each unit holds (a frame without token counts: one each)."""
        units = self._text_units
        if "n_tokens" not in units.columns:
            return np.ones(len(self.unit_ids))
        return units["n_tokens"].fill_null(1).cast(pl.Float64).to_numpy()

    def weights(self, ranking: RankingConfig) -> np.ndarray:
        """The edges' weights under `ranking` (the membership weight set), worked out once per weight."""
        cache = self.__dict__.setdefault("_weights", {})
        if ranking.membership_weight not in cache:
            weight = self._edges[2]
            cache[ranking.membership_weight] = np.where(weight < 0, ranking.membership_weight, weight)
        return cache[ranking.membership_weight]

    def reach(self, entity_ids: list[str], ranking: RankingConfig) -> Reach:
        """How far a question's names reach: the other text units that share an entity (not a hub, not generic)
        with the names' own text units - the passages a walk from them spreads over - counted, and their tokens.
        A few short passages for names that stay among their own pages (2Wiki's people and films); hundreds of
        passages, or a few hundred thousand tokens, where every passage shares names with many others (a novel's
        cast) or where passages are long chunks that each name dozens of things (a textbook cut at 1,200 tokens).
        Counts, not shares: a walk cannot single out one passage of three hundred whether the corpus holds a
        thousand or a million."""
        entities, _ = self._positions
        seeds = np.asarray([entities[e] for e in entity_ids if e in entities], dtype=np.int64)
        if not len(seeds):
            return Reach(0, 0.0)
        indptr, neighbour, _ = self._edges
        offset = len(self.entity_ids)
        own = neighbour[edge_positions(indptr, seeds)[0]]
        own = np.unique(own[own >= offset])
        names = neighbour[edge_positions(indptr, own)[0]]
        names = np.unique(names[names < offset])
        linking = self._linking(ranking)
        names = names[linking[names]]
        near = neighbour[edge_positions(indptr, names)[0]]
        others = np.setdiff1d(near[near >= offset], own)
        return Reach(len(others), float(self._unit_tokens[others - offset].sum()))

    def _linking(self, ranking: RankingConfig) -> np.ndarray:
        """Which entity nodes link passages: not hubs, not in most text units (generic). Worked out once per pair of
        settings (a pass over every edge: not per question)."""
        cache = self.__dict__.setdefault("_linking_by", {})
        key = (ranking.hub_degree, ranking.generic_share)
        if key not in cache:
            indptr, neighbour, _ = self._edges
            offset, units = len(self.entity_ids), len(self.unit_ids)
            degree = np.diff(indptr)
            in_units = np.bincount(np.repeat(np.arange(len(degree)), degree), weights=neighbour >= offset)
            cache[key] = (degree <= ranking.hub_degree) & (in_units <= ranking.generic_share * units)
        return cache[key]

    @cached_property
    def _positions(self) -> tuple[dict[str, int], dict[str, int]]:
        """The node of each entity id, and of each text unit id (after the entities)."""
        return (
            {e: i for i, e in enumerate(self.entity_ids)},
            {u: len(self.entity_ids) + i for i, u in enumerate(self.unit_ids)},
        )

    def scores(
        self, entity_seeds: dict[str, float], unit_seeds: dict[str, float], ranking: RankingConfig | None = None
    ) -> list[tuple[str, float]]:
        """(text unit id, PageRank) from the seeds, best first (ties: table order); none without seeds."""
        ranking = ranking or RankingConfig()
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
        nodes = self._around(seed_nodes, ranking)
        reset = np.zeros(len(nodes))
        reset[np.searchsorted(nodes, seed_nodes)] = [seeds[int(n)] for n in seed_nodes]
        scores = self._pagerank(nodes, reset / reset.sum(), ranking)
        unit = (nodes >= offset) & (scores > 0)
        nodes, scores = nodes[unit], scores[unit]
        if ranking.unit_degree_power:
            indptr = self._edges[0]
            degree = (indptr[nodes + 1] - indptr[nodes]).astype(np.float64)
            scores = scores / np.maximum(degree, 1.0) ** ranking.unit_degree_power
        order = np.lexsort((nodes, -scores))  # best first; ties: table order
        return [
            (self.unit_ids[node - offset], score)
            for node, score in zip((nodes[order]).tolist(), scores[order].tolist())
        ]

    def _pagerank(self, nodes: np.ndarray, reset: np.ndarray, ranking: RankingConfig) -> np.ndarray:
        """Personalised PageRank on the subgraph of `nodes` (sorted): the walk moves along an edge in proportion
        to its weight, or restarts at `reset` (always, from a node with no edge inside)."""
        indptr, neighbour, _ = self._edges
        weight = self.weights(ranking)
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
        damping = ranking.damping
        for _ in range(ranking.iterations):
            moved = np.bincount(dst, weights=x[src] * step, minlength=len(nodes))
            following = damping * moved + (1 - damping + damping * x[dangling].sum()) * reset
            if np.abs(following - x).sum() < ranking.tolerance:
                return following
            x = following
        return x

    def _around(self, seeds: np.ndarray, ranking: RankingConfig) -> np.ndarray:
        """The nodes within `hops` of the seeds (sorted), not expanding past hubs, at most about `max_nodes`."""
        indptr, neighbour, _ = self._edges
        seen = np.zeros(len(indptr) - 1, dtype=bool)
        seen[seeds] = True
        frontier, total = seeds, len(seeds)
        for hop in range(ranking.hops):
            if hop:  # a hub is reached, not walked through (a seed always is)
                frontier = frontier[indptr[frontier + 1] - indptr[frontier] <= ranking.hub_degree]
            reached = np.unique(neighbour[edge_positions(indptr, frontier)[0]])
            frontier = reached[~seen[reached]]
            seen[frontier] = True
            total += len(frontier)
            if total > ranking.max_nodes:
                break
        return np.flatnonzero(seen)


def edge_positions(indptr: np.ndarray, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(where the edges of `nodes` are in a CSR graph's arrays, node after node; how many each has)."""
    starts, counts = indptr[nodes], indptr[nodes + 1] - indptr[nodes]
    return np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(counts.sum()), counts
