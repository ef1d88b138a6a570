"""The query methods' settings sections (local_search, global_search, drift_search, basic_search, query): part of
`Settings` (config/settings.py), kept apart so neither module passes ~500 lines."""

from __future__ import annotations

from typing import Literal

from graphrag_ray.config.ranking import RankingConfig
from graphrag_ray.config.sections import Section, doc


class QueryModels(Section):
    chat_model_id: str = doc("default_chat", "chat model entry for this method's calls")
    embedding_model_id: str = doc("default_embedding", "embedding model entry for the query")


class LocalSearchConfig(QueryModels):
    prompt: str = doc("prompts/local_search_system.txt", "system prompt, relative to the root")
    top_k_entities: int = doc(10, "entities matched to the query", gt=0)
    oversample: int = doc(2, "vector candidates fetched per wanted entity (before the exclude list)", gt=0)
    top_k_relationships: int = doc(10, "out-of-network relationships per selected entity", gt=0)
    max_context_tokens: int = doc(12000, "token budget of the whole context", gt=0)
    community_prop: float = doc(0.15, "share of the budget for community reports", ge=0, le=1)
    text_unit_prop: float = doc(0.5, "share of the budget for source text units", ge=0, le=1)
    conversation_history_max_turns: int = doc(5, "user turns of history put first in the context", ge=0)
    max_tokens: int = doc(2000, "max answer tokens", gt=0)
    text_unit_ranking: Literal["ppr", "graphrag"] = doc(
        "ppr",
        "order of the Sources: ppr (personalised PageRank from the matched entities over the weighted "
        "graph, as HippoRAG and fast-graphrag rank passages: a passage one hop away can enter) or graphrag "
        "(Microsoft GraphRAG's: the matched entities' own text units, in entity order)",
    )
    ranking: RankingConfig = doc(RankingConfig(), "how ppr orders the Sources: every constant, with its provenance")


class GlobalSearchConfig(Section):
    chat_model_id: str = doc("default_chat", "chat model entry for map and reduce")
    map_prompt: str = doc("prompts/global_search_map_system.txt", "map prompt, relative to the root")
    reduce_prompt: str = doc("prompts/global_search_reduce_system.txt", "reduce prompt, relative to the root")
    knowledge_prompt: str = doc(
        "prompts/global_search_knowledge_system.txt", "added to reduce when allow_general_knowledge is on"
    )
    rating_prompt: str = doc("prompts/global_search_rating.txt", "dynamic selection rating prompt")
    data_max_tokens: int = doc(12000, "report tokens per map batch", gt=0)
    reduce_max_tokens: int = doc(12000, "tokens of analysts' points packed into the reduce call", gt=0)
    map_max_length: int = doc(1000, "max answer tokens of a map call", gt=0)
    reduce_max_length: int = doc(2000, "max answer tokens of the reduce call", gt=0)
    allow_general_knowledge: bool = doc(False, "let the reduce add knowledge not in the data (tagged [LLM: verify])")
    dynamic_threshold: int = doc(1, "dynamic selection keeps reports rated at least this (0-5)", ge=0, le=5)
    dynamic_batch_tokens: int = doc(8000, "dynamic selection: report titles and summaries rated per call", gt=0)
    dynamic_lookahead_levels: int = doc(
        2,
        "dynamic selection: levels below the frontier rated in the same round (fewer round trips; more reports rated)",
        ge=0,
    )
    dynamic_budget_tokens: int = doc(
        48000,
        "dynamic selection stops descending once the relevant reports hold "
        "this many tokens, and maps at most this many (the best-rated)",
        gt=0,
    )
    dynamic_repeats: int = doc(1, "ratings per report (their mean is used)", gt=0)
    dynamic_max_level: int = doc(2, "deepest level dynamic selection descends to", ge=0)
    executor: Literal["auto", "ray", "local"] = doc(
        "auto", "map calls as Ray tasks (ray), in-process tasks (local), or ray when a cluster is up (auto)"
    )


class DriftSearchConfig(QueryModels):
    primer_prompt: str = doc("prompts/drift_search_primer.txt", "primer prompt, relative to the root")
    local_prompt: str = doc("prompts/drift_search_local.txt", "follow-up local search prompt (JSON answer)")
    reduce_prompt: str = doc("prompts/drift_search_reduce.txt", "reduce prompt, relative to the root")
    primer_top_k_reports: int = doc(5, "reports given to the primer (by similarity to a HyDE answer)", gt=0)
    n_depth: int = doc(2, "rounds of follow-up local searches", ge=0)
    k_followups: int = doc(3, "follow-ups answered per round (highest scores first)", gt=0)
    concurrency: int = doc(4, "follow-up local searches run at once", gt=0)
    local_max_context_tokens: int = doc(6000, "context budget of each follow-up local search", gt=0)


class BasicSearchConfig(QueryModels):
    prompt: str = doc("prompts/basic_search_system.txt", "system prompt, relative to the root")
    k: int = doc(10, "text units retrieved", gt=0)
    max_context_tokens: int = doc(12000, "token budget of the context", gt=0)
    retriever: Literal["auto", "lexical", "vector", "hybrid"] = doc(
        "auto",
        "lexical (BM25 over the index's lexical/ tables), vector (the embedding model), hybrid (both, "
        "reciprocal-rank fused); auto: lexical when the embedding model is a local_embedding or has no key, "
        "hybrid otherwise",
    )


class QueryConfig(Section):
    community_level: int = doc(2, "Leiden level of the reports used (higher: smaller communities)", ge=0)
    response_type: str = doc("Multiple Paragraphs", "free text describing the answer's form")
    question_gen_prompt: str = doc("prompts/question_gen_system.txt", "question generation prompt")
    router_prompt: str = doc("prompts/router.txt", "auto-routing classification prompt")
    hybrid_prompt: str = doc("prompts/hybrid_combine.txt", "hybrid search: prompt joining local and global answers")
    deadline_s: float = doc(
        120.0,
        "a question's model calls (endpoint check, retries, stalls) end within this many seconds, with one line "
        "naming the endpoint; 0: no deadline. Indexing has none: it judges a slow server by its progress",
        ge=0,
    )
    max_question_chars: int = doc(
        4000,
        "a longer question is refused before any call (DRIFT and global search "
        "send it in every call); use --query-file for long ones",
        gt=0,
    )
