"""Text units ranked by personalised PageRank, as HippoRAG and fast-graphrag rank passages.

One graph of entities and text units: an edge per relationship (its weight) and one between an entity and each text
unit it is in. The walk restarts at the question's entities (by rarity) and at the text units BM25 finds for it; a
passage one hop away - the film's director's page, reached through the director's name in the film's page - gets
the mass that flows there. igraph's PRPACK solves it exactly.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

DAMPING = 0.5  # HippoRAG's: half the walk restarts at the question, so mass stays within a few hops of it
MEMBERSHIP = 5.0  # weight of an entity - text unit edge, against a relationship's (scaled to a mean of 1):
# the walk is after passages, and in the fast method's graph a relationship only repeats that two share one


class GraphWalk:
    """Built once per loaded index (IndexData.graph_walk); `rank` is one PageRank."""

    def __init__(self, entities, relationships, text_units):
        self.entity_ids = entities["id"].to_list()
        self.unit_ids = text_units["id"].to_list()
        self._entities, self._relationships, self._units = entities, relationships, text_units

    @cached_property
    def graph(self):
        import igraph

        index = {e: i for i, e in enumerate(self.entity_ids)}
        by_title = dict(zip(self._entities["title"].to_list(), range(len(self.entity_ids))))
        offset = len(self.entity_ids)
        unit_index = {u: offset + i for i, u in enumerate(self.unit_ids)}
        edges, weights = [], []
        for source, target, weight in zip(self._relationships["source"].to_list(),
                                          self._relationships["target"].to_list(),
                                          self._relationships["weight"].to_list()):
            a, b = by_title.get(source), by_title.get(target)
            if a is not None and b is not None and a != b:
                edges.append((a, b))
                weights.append(float(weight or 1.0))
        links = len(edges)
        for entity_id, units in zip(self.entity_ids, self._entities["text_unit_ids"].to_list()):
            for unit in units or ():
                if unit in unit_index:
                    edges.append((index[entity_id], unit_index[unit]))
                    weights.append(MEMBERSHIP)
        graph = igraph.Graph(n=offset + len(self.unit_ids), edges=edges, directed=False)
        graph.es["weight"] = _scaled(weights, links)
        return graph

    def rank(self, entity_seeds: dict[str, float], unit_seeds: dict[str, float]) -> list[str]:
        """Text unit ids by their PageRank from the seeds, best first (ties: table order); none without seeds."""
        offset = len(self.entity_ids)
        reset = np.zeros(offset + len(self.unit_ids))
        positions = {e: i for i, e in enumerate(self.entity_ids)}
        unit_positions = {u: offset + i for i, u in enumerate(self.unit_ids)}
        for entity_id, weight in entity_seeds.items():
            if entity_id in positions:
                reset[positions[entity_id]] += weight
        for unit_id, weight in unit_seeds.items():
            if unit_id in unit_positions:
                reset[unit_positions[unit_id]] += weight
        if not reset.any():
            return []
        scores = np.asarray(self.graph.personalized_pagerank(damping=DAMPING, reset=reset.tolist(),
                                                             weights="weight"))[offset:]
        order = sorted((i for i in range(len(scores)) if scores[i] > 0), key=lambda i: (-scores[i], i))
        return [self.unit_ids[i] for i in order]


def _scaled(weights: list[float], links: int) -> list[float]:
    """The first `links` weights (relationships) scaled to a mean of 1, so a membership edge (1.0) counts as much
    as an average relationship."""
    if links:
        mean = sum(weights[:links]) / links or 1.0
        weights[:links] = [w / mean for w in weights[:links]]
    return weights
