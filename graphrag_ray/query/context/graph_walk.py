"""Text units ranked by personalised PageRank, as HippoRAG and fast-graphrag rank passages.

One graph of entities and text units: an edge per relationship (its weight) and one between an entity and each text
unit it is in. The walk restarts at the question's entities (by rarity) and at the text units BM25 finds for it; a
passage one hop away - the film's director's page, reached through the director's name in the film's page - gets
the mass that flows there. igraph's PRPACK solves it exactly.
"""

from __future__ import annotations

from functools import cached_property

DAMPING = 0.5  # HippoRAG's: half the walk restarts at the question, so mass stays within a few hops of it
HOPS = 3            # the walk runs on the seeds' neighbourhood: entity -> its passage -> a name in it -> that
MAX_NODES = 5_000   # name's passage; mass further out is negligible at this damping, and a query must not pay
HUB_DEGREE = 500    # for the whole graph (PRPACK on 100k entities: 0.6 s). A hub is reached, not walked through
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
        return [unit for unit, _ in self.scores(entity_seeds, unit_seeds)]

    def scores(self, entity_seeds: dict[str, float], unit_seeds: dict[str, float]) -> list[tuple[str, float]]:
        """(text unit id, PageRank) from the seeds, best first (ties: table order); none without seeds."""
        offset = len(self.entity_ids)
        seeds: dict[int, float] = {}
        entities, units = self._positions
        for ids, weight in [*((entities.get(e), w) for e, w in entity_seeds.items()),
                            *((units.get(u), w) for u, w in unit_seeds.items())]:
            if ids is not None and weight > 0:
                seeds[ids] = seeds.get(ids, 0.0) + weight
        if not seeds:
            return []
        nodes = self._around(sorted(seeds))
        sub = self.graph.induced_subgraph(nodes)  # keeps the order of `nodes` (sorted)
        scores = sub.personalized_pagerank(damping=DAMPING, reset=[seeds.get(n, 0.0) for n in nodes],
                                           weights="weight")
        ranked = sorted(((scores[j], node) for j, node in enumerate(nodes) if node >= offset and scores[j] > 0),
                        key=lambda p: (-p[0], p[1]))  # ties: table order
        return [(self.unit_ids[node - offset], score) for score, node in ranked]

    @cached_property
    def _positions(self) -> tuple[dict[str, int], dict[str, int]]:
        """The node of each entity id, and of each text unit id (after the entities)."""
        return ({e: i for i, e in enumerate(self.entity_ids)},
                {u: len(self.entity_ids) + i for i, u in enumerate(self.unit_ids)})

    @cached_property
    def _adjacency(self) -> list[list[int]]:
        return self.graph.get_adjlist()

    def _around(self, seeds: list[int]) -> list[int]:
        """The nodes within HOPS of the seeds (sorted), not expanding past hubs, at most about MAX_NODES."""
        adjacency = self._adjacency
        seen, frontier = set(seeds), list(seeds)
        for _ in range(HOPS):
            reached = []
            for node in frontier:
                if len(adjacency[node]) > HUB_DEGREE and node not in seeds:
                    continue
                for other in adjacency[node]:
                    if other not in seen:
                        seen.add(other)
                        reached.append(other)
            frontier = reached
            if len(seen) > MAX_NODES:
                break
        return sorted(seen)


def _scaled(weights: list[float], links: int) -> list[float]:
    """The first `links` weights (relationships) scaled to a mean of 1, so a membership edge (1.0) counts as much
    as an average relationship."""
    if links:
        mean = sum(weights[:links]) / links or 1.0
        weights[:links] = [w / mean for w in weights[:links]]
    return weights
