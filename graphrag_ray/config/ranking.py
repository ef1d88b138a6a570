"""`local_search.ranking`: every constant that orders local search's Sources, with its default and where the default
came from. Read by the engine (query/context/): nothing here is a module global a test or a benchmark patches.

Provenance: the defaults were chosen on `jobs/bench_retrieval.py`'s 2Wiki and GraphRAG-Bench Medical question sets
before those sets were split; from now on a change is tuned on the **dev halves** the benchmark prints and reported
on the **test halves** (every corpus, every document shape)."""

from __future__ import annotations

from graphrag_ray.config.sections import Section, doc


class RankingConfig(Section):
    # -- the graph walk (personalised PageRank over entities and text units, as HippoRAG and fast-graphrag) ------
    damping: float = doc(
        0.6, "share of the walk that follows edges (HippoRAG: 0.5); the rest restarts at the seeds", gt=0, lt=1
    )
    hops: int = doc(3, "the walk runs on the seeds' neighbourhood this many edges out", ge=1)
    max_nodes: int = doc(
        5_000, "about how many nodes that neighbourhood may hold (a query never pays for the graph)", gt=0
    )
    hub_degree: int = doc(500, "a node with more edges is reached, not walked through", gt=0)
    membership_weight: float = doc(
        5.0,
        "weight of an entity - text unit edge against a relationship's (scaled to a mean of 1): the walk is after "
        "passages, and in the fast method's graph a relationship only repeats that two share one",
        gt=0,
    )
    unit_degree_power: float = doc(
        0.25,
        "a text unit's score is divided by its edges to this power: a long page naming fifty things collects mass "
        "from all of them without being about any (2Wiki, standard method: 0.92/0.90 -> 0.94/0.92)",
        ge=0,
    )
    iterations: int = doc(100, "power iterations at most", gt=0)
    tolerance: float = doc(1e-10, "power iteration stops when the scores move less than this (L1)", gt=0)
    # -- seeds: where the walk restarts ------------------------------------------------------------------------
    unit_seeds: int = doc(
        10, "text units BM25 finds for the question: the walk's seeds beside its names, or alone without names", gt=0
    )
    seed_max_spread: float = doc(
        0.03,
        "a name whose words are in more than this share of the text units points the walk nowhere in particular "
        "(its entity's units are a few of the many that say it); 2Wiki 0.96/0.93 -> 0.96/0.94, Medical 0.651 -> "
        "0.663; the same from 0.025 to 0.04",
        ge=0,
        le=1,
    )
    min_spread_units: int = doc(5, "... or in more than this many text units, in a small index", ge=0)
    generic_share: float = doc(
        0.5, "an entity in more than this share of the text units names nothing in particular: never matched", gt=0
    )
    generic_min_units: int = doc(10, "(only in an index of at least this many text units)", ge=0)
    # -- the walk's and the words' rankings, fused per question ------------------------------------------------
    lexical_weight: float = doc(
        2.0,
        "among the units the walk reaches, each is scored walk x (1 + this x its BM25 score for the question), "
        "both scaled to their best: the question's other words choose among what its names reach "
        "(2Wiki 0.94/0.91 -> 0.96/0.93)",
        ge=0,
    )
    fusion_k: float = doc(
        10.0, "reciprocal rank fusion's constant (1 / (k + rank)) when the walk's and BM25's rankings are fused", gt=0
    )
    walk_reach: float = doc(
        80.0,
        "how far a question's names reach, in passages: how many other text units share a name with their own. The "
        "walk's weight in the fusion is (the smaller of walk_reach / max(walk_reach, that count) and "
        "walk_reach_tokens / max(walk_reach_tokens, their tokens)) ** reach_power, BM25's the rest: the walk decides "
        "for names that stay among a few passages, the words for names that reach many, and between them the "
        "weight falls smoothly (no threshold between corpora). Chosen on the dev halves of 2Wiki-51/101 and "
        "HotpotQA (both shapes, fast and standard graphs), GraphRAG-Bench Medical and Novel, from 10 to 160 "
        "(jobs/results/tune_ranking.txt)",
        gt=0,
    )
    walk_reach_tokens: float = doc(
        10_000.0,
        "... and in tokens: how much text those units hold. A long chunk names dozens of things, so names reach "
        "its neighbours through all of them; 80 wiki passages are about 10,000 tokens, 8 chunks of 1,200. Chosen "
        "on the same dev halves from 8,000 to 24,000 (GraphRAG-Bench Medical and Novel, cut at 1,200 tokens, "
        "lost to basic search under the passage count alone)",
        gt=0,
    )
    reach_power: float = doc(1.0, "how fast the walk's weight falls past walk_reach", gt=0)
