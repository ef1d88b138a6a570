"""The local (entity-centred) mixed context, shared by local search, DRIFT follow-ups, hybrid and QGen.

Budget: conversation history first, then community reports (community_prop), text units (text_unit_prop)
and the rest for entities and relationships, as Microsoft GraphRAG's LocalSearchMixedContext does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from graphrag_ray.config.ranking import RankingConfig
from graphrag_ray.config.settings import LocalSearchConfig
from graphrag_ray.query.context.budget import pack_table, source_records, sources_table
from graphrag_ray.query.context.graph_walk import Reach
from graphrag_ray.query.context.history import ConversationHistory
from graphrag_ray.query.index_data import IndexData

# the IndexData lookups this context reads (an engine using it builds them when it is set up)
LOCAL_CONTEXT_LOOKUPS = (
    "entity_rows",
    "entity_by_title",
    "relationships_by_title",
    "text_unit_rows",
    "report_by_community",
    "community_rows",
    "communities_of_entity",
    "claims_by_subject",
    "entity_matcher",
    "graph_walk",
)
log = logging.getLogger(__name__)
CLAIM_COLUMNS = ("object_id", "type", "status", "start_date", "end_date", "description")
# every ranking constant is a setting: local_search.ranking (config/ranking.py), with its provenance


@dataclass
class LocalContext:
    text: str
    records: dict[str, list[dict]] = field(default_factory=dict)
    selected: list[dict] = field(default_factory=list)  # matched entities, best first
    # the rows sent, per table, best first: {key: (title, columns, rows)} - what a question asking several
    # indexes merges (query/multi.py)
    tables: dict[str, tuple[str, list[str], list[list]]] = field(default_factory=dict)
    named: int = 0  # how many of the selected entities the question names (a strength several indexes compare)


async def map_query_to_entities(
    query: str,
    data: IndexData,
    embed: Callable | None,
    k: int,
    oversample: int,
    exclude: set[str] | None = None,
    ranking: RankingConfig | None = None,
) -> list[dict]:
    """Entities for a query: those it names (whole words, rarest first: query/context/entity_match.py), then the
    best BM25 matches of their names and descriptions, then the nearest descriptions in LanceDB. Generic entities
    (stop words, in most text units) never take a slot."""
    exclude = {e.casefold() for e in (exclude or set())}
    ranking = ranking or RankingConfig()
    picked: list[dict] = []
    seen: set[str] = set()
    matcher = data.entity_matcher

    def take(entity_id: str) -> None:
        row = data.entity_rows.get(entity_id)
        if (
            row
            and row["id"] not in seen
            and row["title"].casefold() not in exclude
            and len(picked) < k
            and not matcher.generic(entity_id, ranking)
        ):
            seen.add(row["id"])
            picked.append(row)

    for entity_id, _ in matcher.named(query, ranking):
        take(entity_id)
    if len(picked) < k and data.entities.height:
        for entity_id, _ in data.lexical("entities").search(query, k * oversample):
            take(entity_id)
    if embed is not None and len(picked) < k and data.entities.height:
        if data.vectors_dir is None:
            log.warning("no vector tables given (no index folder): matching entities by name only")
        else:
            vector = (await embed([query]))[0]  # an endpoint that fails is an error, not a reason to answer with less
            for entity_id in data.nearest("entity_description", data.entities.height, vector, k * oversample) or []:
                take(entity_id)
    return picked


def ranked_units(
    data: IndexData, query: str, selected: list[dict], cfg: LocalSearchConfig, chosen_relationships: set[str]
) -> list[dict]:
    """The Sources in order. ppr: personalised PageRank from the entities the question names (by rarity);
    graphrag: Microsoft GraphRAG's order (the selected entities' own text units, by entity, then by how many chosen
    relationships they hold)."""
    if cfg.text_unit_ranking == "ppr" and query and data.text_units.height:
        order = _walked_units(data, query, selected, cfg.ranking)
        return [data.text_unit_rows[u] for u in order if u in data.text_unit_rows]
    units: list[tuple[int, int, dict]] = []
    seen_units: set[str] = set()
    for order, entity in enumerate(selected):
        for unit_id in entity["text_unit_ids"]:
            unit = data.text_unit_rows.get(unit_id)
            if unit and unit_id not in seen_units:
                seen_units.add(unit_id)
                n_rel = len(chosen_relationships.intersection(unit["relationship_ids"] or []))
                units.append((order, -n_rel, unit))
    units.sort(key=lambda t: (t[0], t[1], t[2]["human_readable_id"]))
    return [u for *_, u in units]


def build_local_context(
    data: IndexData,
    selected: list[dict],
    cfg: LocalSearchConfig,
    count: Callable[[str], int],
    history: ConversationHistory | None = None,
    max_tokens: int | None = None,
    community_level: int | None = None,
    query: str = "",
) -> LocalContext:
    budget = max_tokens or cfg.max_context_tokens
    parts: list[str] = []
    records: dict[str, list[dict]] = {}
    tables: dict[str, tuple[str, list[str], list[list]]] = {}
    used = 0

    def table(key: str, title: str, columns: list[str], rows: list[list], budget: int) -> tuple[str, int]:
        text, kept = pack_table(title, columns, rows, count, budget)
        if kept:
            parts.append(text)
            tables[key] = (title, columns, rows[:kept])
        return text, kept

    if history and cfg.conversation_history_max_turns:
        turns = history.recent(cfg.conversation_history_max_turns)
        text, kept = table(
            "history",
            "Conversation History",
            ["role", "content"],
            [[t.role.value, t.content] for t in turns],
            budget // 4,
        )
        if kept:
            used += count(text)
            records["history"] = [{"role": t.role.value, "content": t.content} for t in turns[:kept]]

    community_budget = int(budget * cfg.community_prop)
    unit_budget = int(budget * cfg.text_unit_prop)
    local_budget = max(0, budget - used - community_budget - unit_budget)

    reports = _ranked_reports(data, selected, community_level)
    text, kept = table(
        "reports",
        "Reports",
        ["id", "title", "content"],
        [[r["human_readable_id"], r["title"], r["full_content"]] for r in reports],
        community_budget,
    )
    if kept:
        records["reports"] = [{"id": r["human_readable_id"], "title": r["title"]} for r in reports[:kept]]

    # entities, then relationships: in-network first, then out-of-network by links and combined degree
    titles = {e["title"] for e in selected}
    text_e, kept_e = table(
        "entities",
        "Entities",
        ["id", "entity", "description", "number of relationships"],
        [[e["human_readable_id"], e["title"], e["description"], e["degree"]] for e in selected],
        local_budget,
    )
    if kept_e:
        records["entities"] = [{"id": e["human_readable_id"], "entity": e["title"]} for e in selected[:kept_e]]
    rels = _ranked_relationships(data, selected, titles, cfg.top_k_relationships)
    text_r, kept_r = table(
        "relationships",
        "Relationships",
        ["id", "source", "target", "description", "weight", "rank", "links"],
        [
            [
                r["human_readable_id"],
                r["source"],
                r["target"],
                r["description"],
                r["weight"],
                r["combined_degree"],
                links,
            ]
            for r, links in rels
        ],
        max(0, local_budget - count(text_e)),
    )
    if kept_r:
        records["relationships"] = [
            {"id": r["human_readable_id"], "source": r["source"], "target": r["target"]} for r, _ in rels[:kept_r]
        ]

    # claims about the selected entities (Microsoft GraphRAG's "Claims" table), from what the local budget left
    claims = [c for e in selected for c in data.claims_by_subject.get(e["title"], [])]
    _, kept_c = table(
        "claims",
        "Claims",
        ["id", "entity", *CLAIM_COLUMNS],
        [[c["human_readable_id"], c["subject_id"], *(c[k] for k in CLAIM_COLUMNS)] for c in claims],
        max(0, local_budget - count(text_e) - (count(text_r) if kept_r else 0)),
    )
    if kept_c:
        records["claims"] = [
            {
                "id": c["human_readable_id"],
                "entity": c["subject_id"],
                "type": c["type"],
                "description": c["description"],
            }
            for c in claims[:kept_c]
        ]

    # text units: by personalised PageRank from the question (or Microsoft GraphRAG's entity order)
    units = ranked_units(data, query, selected, cfg, {r["id"] for r, _ in rels[:kept_r]})
    _, kept_u = table("sources", "Sources", *sources_table(units), unit_budget)
    if kept_u:
        records["sources"] = source_records(units[:kept_u])
    named = dict(data.entity_matcher.named(query, cfg.ranking)) if query else {}
    return LocalContext("\n".join(parts), records, selected, tables, sum(1 for e in selected if e["id"] in named))


def _ranked_reports(data: IndexData, selected: list[dict], community_level: int | None) -> list[dict]:
    """The reports of the communities holding the selected entities (at or above `community_level`), ranked by
    how many of them each holds, then by rank."""
    matches: dict[int, int] = {}
    for entity in selected:
        for community in data.communities_of_entity.get(entity["id"], []):
            if community_level is None or data.community_rows[community]["level"] <= community_level:
                matches[community] = matches.get(community, 0) + 1
    reports = [data.report_by_community[c] for c in matches if c in data.report_by_community]
    return sorted(reports, key=lambda r: (-matches[r["community"]], -(r["rank"] or 0), r["community"]))


def _ranked_relationships(data: IndexData, selected: list[dict], titles: set[str], top_k: int):
    in_network: dict[str, dict] = {}
    out_network: dict[str, dict] = {}
    for entity in selected:
        for rel in data.relationships_by_title.get(entity["title"], []):
            if rel["source"] in titles and rel["target"] in titles:
                in_network[rel["id"]] = rel
            else:
                out_network[rel["id"]] = rel
    links: dict[str, int] = {}
    for rel in out_network.values():
        other = rel["target"] if rel["source"] in titles else rel["source"]
        links[other] = links.get(other, 0) + 1
    ranked_in = sorted(in_network.values(), key=lambda r: (-r["combined_degree"], -r["weight"], r["human_readable_id"]))
    ranked_out = sorted(
        out_network.values(),
        key=lambda r: (
            -links[r["target"] if r["source"] in titles else r["source"]],
            -r["combined_degree"],
            r["human_readable_id"],
        ),
    )
    out = [(r, 2) for r in ranked_in]
    out += [
        (r, links[r["target"] if r["source"] in titles else r["source"]])
        for r in ranked_out[: top_k * max(1, len(selected))]
    ]
    return out


def _walked_units(data: IndexData, query: str, selected: list[dict], ranking: RankingConfig) -> list[str]:
    """Text unit ids in Sources order, by personalised PageRank fused with the question's words.

    A question naming entities: the walk restarts at its names (by rarity), and its other words choose among what
    the names reach (`lexical_weight`). That ranking and BM25's are fused per question by reciprocal rank, the
    walk's weight following how far the names reach (`GraphWalk.reach`): where the names' passages share
    names with few others (a page about a person), the walk decides; where they share them with much of the corpus
    (long chunks of one subject, a novel's cast), the words do - smoothly, with no threshold between corpora.
    A question naming nothing (or only names on most pages) is read by its words: BM25's units first, then the
    walk from them."""
    matcher, lexical = data.entity_matcher, data.lexical("text_units")
    named = dict(matcher.named(query, ranking))
    seeds = {e["id"]: named[e["id"]] for e in selected if e["id"] in named and _points(lexical, e, ranking)}
    hits = lexical.search(query, ranking.unit_seeds)
    if not seeds:  # a question about things, not names: its words decide, and the walk from them adds what they
        # do not say (jobs/bench_retrieval.py, GraphRAG-Bench Medical: the walk alone recalled less)
        unit_seeds = {unit_id: score / hits[0][1] for unit_id, score in hits}
        entity_seeds = {e["id"]: matcher.rarity(e["id"]) for e in selected}
        walked = [u for u, _ in data.graph_walk.scores(entity_seeds, unit_seeds, ranking) if u not in unit_seeds]
        return list(unit_seeds) + walked
    scored = data.graph_walk.scores(seeds, {}, ranking)
    if scored:  # the names lead; the question's other words choose among what they reach
        scored = _reweighted(scored, lexical.scores(query, [u for u, _ in scored]), ranking)
    walked = [u for u, _ in scored]
    walk_weight = _walk_weight(data.graph_walk.reach(list(seeds), ranking), ranking)
    if walk_weight >= 1.0 or not hits:
        return walked
    words = [u for u, _ in lexical.search(query, max(len(walked), ranking.unit_seeds))]
    return fused({"walk": walked, "words": words}, {"walk": walk_weight, "words": 1.0 - walk_weight}, ranking)


def _walk_weight(reach: Reach, ranking: RankingConfig) -> float:
    """The walk's share of the fusion: 1 while the names reach at most `walk_reach` passages and
    `walk_reach_tokens` tokens, falling smoothly as they reach past either - many short pages sharing a name, or a
    few long chunks that name everything (a link through a chunk naming fifty things says little about any)."""
    by_passages = ranking.walk_reach / max(ranking.walk_reach, reach.passages)
    by_tokens = ranking.walk_reach_tokens / max(ranking.walk_reach_tokens, reach.tokens)
    return min(by_passages, by_tokens) ** ranking.reach_power


def fused(rankings: dict[str, list[str]], weights: dict[str, float], ranking: RankingConfig) -> list[str]:
    """Weighted reciprocal rank fusion: each item scores the sum of weight / (fusion_k + rank) over the rankings
    that hold it; best first (ties: the first ranking's order)."""
    score: dict[str, float] = {}
    for name, order in rankings.items():
        for rank, item in enumerate(order):
            score[item] = score.get(item, 0.0) + weights[name] / (ranking.fusion_k + rank)
    first = {item: i for i, item in enumerate(next(iter(rankings.values())))}
    return sorted(score, key=lambda item: (-score[item], first.get(item, len(first))))


def _points(lexical, entity: dict, ranking: RankingConfig) -> bool:
    """Whether the entity's name points the walk somewhere: its words are in at most `seed_max_spread` of the
    text units (or `min_spread_units` of them, in a small index)."""
    limit = max(ranking.seed_max_spread, ranking.min_spread_units / max(1, len(lexical.ids)))
    return lexical.spread(entity["title"] or "") <= limit


def _reweighted(
    scored: list[tuple[str, float]], lexical: list[float], ranking: RankingConfig
) -> list[tuple[str, float]]:
    best_walk, best_lexical = scored[0][1], max(lexical) or 1.0
    return sorted(
        (
            (unit, walk / best_walk * (1 + ranking.lexical_weight * words / best_lexical))
            for (unit, walk), words in zip(scored, lexical)
        ),
        key=lambda p: -p[1],
    )  # stable: ties as walked
