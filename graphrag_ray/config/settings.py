"""Every configuration key, with its default and a one-line description.

This module is the configuration reference: `graphrag-ray init` renders it (descriptions as comments)
into settings.yaml, and `configs/settings.yaml` is that rendering. Unknown keys are errors (extra=forbid).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from graphrag_ray.config.batch import BatchConfig
from graphrag_ray.config.query_sections import (
    BasicSearchConfig,
    DriftSearchConfig,
    GlobalSearchConfig,
    LocalSearchConfig,
    QueryConfig,
)
from graphrag_ray.config.ranking import RankingConfig
from graphrag_ray.config.sections import Section, doc

__all__ = ["Section", "doc", "RankingConfig"]  # re-exported: the sections are built from them


class RateLimitConfig(Section):
    rpm: int | None = doc(None, "requests per minute for this model across the whole job (null: no limit)", gt=0)
    tpm: int | None = doc(None, "tokens per minute (prompt + completion) across the whole job (null: no limit)", gt=0)


class RetryConfig(Section):
    max_attempts: int = doc(
        10,
        "attempts per request on 5xx, timeouts and dropped connections (429s do not "
        "count: see rate_limit_deadline_s; an unusable answer is asked again once, "
        "changed, not retried)",
        gt=0,
    )
    rate_limit_deadline_s: float = doc(
        900.0,
        "seconds a request keeps retrying while the provider answers 429 (a rate limit is waited out, not a failure)",
        gt=0,
    )
    initial_wait: float = doc(1.0, "seconds before the first retry; doubles each attempt", gt=0)
    max_wait: float = doc(60.0, "longest wait between two attempts, in seconds", gt=0)
    jitter: float = doc(1.0, "random seconds added to each wait so workers do not retry in lockstep", ge=0)


class PriceConfig(Section):
    input_per_1m: float | None = doc(
        None,
        "USD per 1M prompt tokens, for estimates and the ledger (null, with output_per_1m null too: the model's "
        "list price in llm/prices.py; a model not listed there and not on this machine is said to be unpriced)",
        ge=0,
    )
    output_per_1m: float | None = doc(None, "USD per 1M completion tokens (null: as input_per_1m)", ge=0)
    cached_input_per_1m: float | None = doc(
        None,
        "USD per 1M prompt tokens the provider served from its prompt cache (null: the list price's when the "
        "prices come from the list, else input_per_1m: no discount)",
        ge=0,
    )
    batch_discount: float | None = doc(
        None, "share of the price a Batch API call bills (null: the provider's, 0.5 for OpenAI)", gt=0, le=1
    )

    @classmethod
    def listed(cls, model: str) -> PriceConfig:
        """The list price of `model` written out (init writes it into settings.yaml, where the user sees it)."""
        from graphrag_ray.config.prices import list_price

        price = list_price(model)
        if price is None:
            return cls()
        return cls(
            input_per_1m=price.input,
            output_per_1m=price.output,
            cached_input_per_1m=price.cached_input,
            batch_discount=price.batch_discount,
        )


class ModelConfig(Section):
    type: Literal["chat", "embedding", "local_embedding"] = doc(
        "chat",
        "chat (completions), embedding (an endpoint), or local_embedding (hashed character n-grams "
        "computed in-process: no endpoint, no download, suits Chinese and English)",
    )
    api_type: Literal["openai", "azure"] = doc("openai", "openai: any OpenAI-compatible server; azure: Azure OpenAI")
    api_base: str = doc("https://api.openai.com/v1", "base URL of the OpenAI-compatible endpoint")
    api_version: str | None = doc(None, "Azure OpenAI api-version (azure only)")
    api_key: SecretStr | None = doc(None, "API key; use ${ENV_VAR} so the key stays out of the file")
    model: str = doc("gpt-4o-mini", "model name (Azure: the deployment name)")
    encoding: str | None = doc(None, "tiktoken encoding for counting tokens (null: chosen from the model name)")
    max_tokens: int = doc(4000, "max completion tokens per call (reserved against the TPM limit)", gt=0)
    temperature: float | None = doc(
        0.0,
        "sampling temperature (null: not sent; reasoning models that take only their default are never sent one)",
        ge=0,
        le=2,
    )
    reasoning: bool | None = doc(
        None,
        "a reasoning model, whose reasoning counts in its answer budget (null: from "
        "the model name: o1/o3/o4, gpt-5, deepseek-reasoner/-r1, qwq, ...)",
    )
    reasoning_max_tokens: int = doc(
        16000,
        "answer budget per call of a reasoning model, reasoning included (used instead of max_tokens when larger)",
        gt=0,
    )
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = doc(
        None, "reasoning_effort sent to a reasoning model (null: the provider's default)"
    )
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] | None = doc(
        None,
        "the name the endpoint takes for the answer budget (null: from the model name, and learned from a "
        "400 that names it)",
    )
    response_format: Literal["json_schema", "json_object", "none"] | None = doc(
        None,
        "the richest structured output the endpoint takes (null: from the model name, and learned from a "
        "400: json_schema -> json_object -> none, JSON then asked for in the prompt)",
    )
    http_client: Literal["aiohttp", "httpx"] = doc(
        "aiohttp",
        "the HTTP client every request goes out on: aiohttp (less CPU per call) or httpx (httpx2); "
        "azure: the openai SDK's client on that transport",
    )
    request_timeout: float = doc(
        180.0,
        "seconds before a request answered in one piece is abandoned and retried "
        "(a streamed one is judged by stall_timeout instead)",
        gt=0,
    )
    stall_timeout: float = doc(
        120.0,
        "a streamed request is abandoned only when its endpoint has sent nothing - "
        "to it or to any other request of this process - for this many seconds (a "
        "local server busy generating is making progress, however slowly)",
        gt=0,
    )
    stream_requests: Literal["auto", "always", "never"] = doc(
        "auto",
        "ask for every answer as a stream, so slow generation is measured by progress, not total time; "
        "auto: for plain-http endpoints (local servers: llama.cpp, Ollama, vLLM, LM Studio)",
    )
    concurrency: int = doc(16, "requests in flight at once per worker process", gt=0)
    dimensions: int | None = doc(None, "embedding size (requested from endpoints that support it; local: 256)", gt=0)
    batch_size: int = doc(16, "texts per embedding request", gt=0)
    batch_max_tokens: int = doc(8191, "max tokens per embedding request", gt=0)
    rate_limit: RateLimitConfig = doc(RateLimitConfig(), "limits shared by every worker on every node")
    retry: RetryConfig = doc(RetryConfig(), "retry policy (the SDK's own retries are off)")
    price: PriceConfig = doc(PriceConfig(), "prices used for cost estimates and the usage ledger")


def _default_models() -> dict[str, ModelConfig]:
    return {
        "default_chat": ModelConfig(
            type="chat", api_key=SecretStr("${GRAPHRAG_API_KEY}"), price=PriceConfig.listed("gpt-4o-mini")
        ),
        "default_embedding": ModelConfig(
            type="embedding",
            model="text-embedding-3-small",
            api_key=SecretStr("${GRAPHRAG_API_KEY}"),
            price=PriceConfig.listed("text-embedding-3-small"),
        ),
    }


class InputConfig(Section):
    base_dir: str = doc("input", "folder (relative to the root), glob, or s3:// / gs:// URI of input files")
    file_type: Literal["auto", "csv", "text", "json", "jsonl", "parquet"] = doc(
        "auto", "auto: by extension (.csv .txt .md .json .jsonl .parquet; .pdf .docx .pptx .xlsx .html .epub)"
    )
    file_pattern: str | None = doc(None, "glob of files inside base_dir (null: every supported file)")
    id_column: str = doc("id", "column holding a document id (csv/json/parquet; optional)")
    title_column: str = doc("title", "column holding a document title (optional; the file name otherwise)")
    text_column: str = doc("text", "column holding the document text (required for csv/json/parquet)")
    encoding: str = doc("utf-8", "text encoding of input files")


class ChunksConfig(Section):
    size: int = doc(1200, "tokens per text unit", gt=0)
    overlap: int = doc(100, "tokens shared by consecutive text units of a document", ge=0)
    encoding: str | None = doc(None, "tiktoken encoding for chunking (null: the extraction model's)")


class ExtractGraphConfig(Section):
    model_id: str = doc("default_chat", "chat model entry used for extraction")
    prompt: str = doc("prompts/extract_graph.txt", "extraction prompt, relative to the root")
    continue_prompt: str = doc("prompts/extract_graph_continue.txt", "gleaning prompt, relative to the root")
    entity_types: list[str] = doc(["organization", "person", "geo", "event"], "entity types to extract")
    max_gleanings: int = doc(1, "extra rounds asking for missed entities (0: none)", ge=0)
    gleaning_layout: Literal["names", "conversation"] = doc(
        "names",
        "names: a gleaning resends the extraction prompt (a cached prefix) and the names found so far; "
        "conversation: the prompt, the answers so far and the question (Microsoft GraphRAG's), whose answers are "
        "billed again as uncached input (jobs/bench_cost.py --variant measures both)",
    )


class SummarizeConfig(Section):
    model_id: str = doc("default_chat", "chat model entry used to merge descriptions")
    prompt: str = doc("prompts/summarize_descriptions.txt", "summary prompt, relative to the root")
    max_length: int = doc(500, "max words of a merged description", gt=0)
    summarize_from: int = doc(
        4,
        "an item is summarised by the model from this many distinct descriptions, or when they pass max_length "
        "words together; fewer and shorter are joined as they are, with no call (a summary of two or three "
        "sentences restates them at the price of its output). LightRAG's rule (force_llm_summary_on_merge: 4 "
        "when introduced, 8 today); 2 summarises every item of two or more, as Microsoft GraphRAG does",
        ge=2,
    )
    max_input_tokens: int = doc(4000, "descriptions per call; longer lists are summarised in rolling rounds", gt=0)
    revise_on_update: bool = doc(
        True,
        "update: an entity of many descriptions that gained or lost a few is "
        "summarised from its previous summary and the changed descriptions (one call), "
        "not from all of them again",
    )
    keep_max_added_share: float = doc(
        0.1,
        "update: an item keeps its summary while the descriptions added since it was written are at most this "
        "share of its descriptions and none was removed (a removed one's statements must leave the summary; the "
        "unsaid ones are told to the revision that follows); 0: revise on any change",
        ge=0,
        le=1,
    )
    update_prompt: str = doc("prompts/summarize_descriptions_update.txt", "revision prompt, relative to the root")
    revisions_per_call: int = doc(
        8,
        "update: up to this many revisions (each a summary and its few changed "
        "descriptions) share one call, answered as JSON; 1 sends each alone",
        gt=0,
    )
    update_batch_prompt: str = doc(
        "prompts/summarize_descriptions_update_batch.txt",
        "prompt of several revisions in one call, relative to the root",
    )


class ResolveEntitiesConfig(Section):
    enabled: bool = doc(
        False,
        "entity resolution: merge entities that are one thing under several names "
        "(HOLMES / SHERLOCK HOLMES, 李老板 / 李明); the LLM confirms every merge",
    )
    model_id: str = doc("default_chat", "chat model entry that confirms candidate merges")
    prompt: str = doc("prompts/resolve_entities.txt", "confirmation prompt, relative to the root")
    embedding_model_id: str = doc("default_embedding", "embedding model entry for name similarity")
    similarity: float = doc(
        0.95,
        "two names of one type whose embeddings are this similar (cosine) are candidates "
        "besides those the name rules find; above 1: name rules only",
        gt=0,
        le=1.01,
    )
    max_group: int = doc(
        20, "names per confirmation call: small groups are asked together, a larger group is split", ge=2
    )
    max_candidates_per_name: int = doc(
        20, "a short name matching more names than this is too ambiguous to ask about", gt=0
    )
    description_chars: int = doc(400, "characters of each entity's descriptions shown as evidence", gt=0)


class ClusterConfig(Section):
    max_cluster_size: int = doc(10, "communities larger than this are split into a deeper level", gt=1)
    seed: int = doc(0xDEADBEEF, "Leiden seed: the same seed gives the same communities")
    max_levels: int = doc(8, "deepest level of the hierarchy", gt=0)


class CommunityReportsConfig(Section):
    model_id: str = doc("default_chat", "chat model entry used to write community reports")
    prompt: str = doc("prompts/community_report.txt", "report prompt, relative to the root")
    max_length: int = doc(2000, "max words of a report", gt=0)
    max_input_length: int = doc(8000, "max tokens of a community's context; larger ones use sub-reports", gt=0)
    min_llm_entities: int = doc(
        3,
        "a community of fewer entities (and no sub-communities) gets a report written from its rows with no call: "
        "a pair's report would restate its one relationship (1: every community is written by the model)",
        ge=1,
    )
    revise_on_update: bool = doc(
        True,
        "update: a changed community's report is revised from the previous report "
        "and the changed rows when that prompt is the smaller",
    )
    revise_min_changed_share: float = doc(
        0.2,
        "update: a community keeps its report until this share of its rows were added, removed or had their "
        "description changed since the report was written (0: revise on any change)",
        ge=0,
        le=1,
    )
    update_prompt: str = doc("prompts/community_report_update.txt", "revision prompt, relative to the root")


class ExtractClaimsConfig(Section):
    enabled: bool = doc(False, "extract claims (covariates) about entities; off by default, as in GraphRAG")
    model_id: str = doc("default_chat", "chat model entry used for claims")
    prompt: str = doc("prompts/extract_claims.txt", "claims prompt, relative to the root")
    description: str = doc(
        "Any claims or facts that could be relevant to information discovery.", "what counts as a claim"
    )
    max_gleanings: int = doc(1, "extra rounds asking for missed claims", ge=0)


class FastConfig(Section):
    concept_min_count: int = doc(2, "a common noun becomes an entity when a text unit repeats it this often", gt=0)
    min_node_frequency: int = doc(1, "entities in fewer text units are pruned", gt=0)
    edge_weight: Literal["count", "pmi"] = doc("count", "co-occurrence weight: text units shared, or PMI")
    edge_percentile: float = doc(0.0, "pairs weighted below this percentile are pruned (0: keep all)", ge=0, lt=100)
    max_concept_share: float = doc(
        0.2,
        "a common noun in more of the text units than this share is generic (like "
        "文件, 选项, file, option) and not an entity; with at least 10 text units",
        gt=0,
        le=1,
    )
    max_edges_per_entity: int = doc(
        20,
        "co-occurrence pairs kept per entity, its strongest (a pair stays when it "
        "is among either end's strongest), so a hub's degree means something",
        gt=0,
    )
    max_description_sentences: int = doc(3, "sentences kept as an entity's or relationship's description", gt=0)
    report_sentences: int = doc(3, "most central sentences in an extractive report's summary", gt=0)
    report_findings: int = doc(5, "strongest relationships listed as an extractive report's findings", gt=0)


class EmbedConfig(Section):
    model_id: str = doc("default_embedding", "embedding model entry")
    enabled: bool = doc(True, "embed entity descriptions, text units and reports into LanceDB")
    ann_index_rows: int = doc(100_000, "build an ANN index on a vector table once it has this many rows", gt=0)
    ann_index: Literal["ivf_hnsw_sq", "ivf_pq"] = doc(
        "ivf_hnsw_sq",
        "ANN index type: ivf_hnsw_sq (8-bit scalar quantization, HNSW graphs in IVF partitions: "
        "near-exact distances, fast queries) or ivf_pq (product quantization: smaller and about 3x faster to "
        "build, but its distances need a wide exact re-rank; jobs/bench_ann.py)",
    )
    nprobes: int = doc(8, "ANN search: index partitions probed per query (more: better recall, slower)", gt=0)
    refine_factor: int | None = doc(
        None,
        "ANN search: candidates re-ranked with exact distances per result "
        "wanted; null: by the table's own index, 5 for ivf_hnsw_sq, 40 for ivf_pq "
        "(PQ distances alone find a sixth of the true top 10 on 1536-dim vectors)",
        ge=1,
    )


class WorkersConfig(Section):
    executor: Literal["auto", "ray", "local"] = doc(
        "auto",
        "ray: Ray actors (the cluster, or a Ray started for the run); local: in this process, no Ray "
        "start-up; auto: ray when a cluster is there to join (a submitted job, RAY_ADDRESS, Ray already running "
        "here), or when this machine has ray_min_cpus CPUs and the input exceeds local_max_input_mb (more parsing "
        "than one process does in time), else local - and an update whose new or changed input is within "
        "local_max_input_mb runs locally, cluster or not",
    )
    local_max_input_mb: float = doc(1.0, "auto: inputs up to this size (~250k tokens) run in this process", ge=0)
    ray_min_cpus: int = doc(
        4,
        "auto with no cluster to join: Ray is started for a run only on a machine with this many CPUs; on fewer, "
        "one process keeps up with the calls and Ray's daemons cost memory and buy nothing (measured at 1M tokens "
        "on 2 cores: in this process 37-38 s and 0.81x Microsoft GraphRAG's memory; with Ray 42-50 s and 1.84x)",
        ge=1,
    )
    num_actors: int = doc(
        2, "async Ray actors doing LLM work (they share the job's rate limiter); local: workers on one event loop", gt=0
    )
    actor_cpus: float = doc(0.5, "CPUs reserved per actor", ge=0)
    partition_size: int = doc(16, "work items per partition (the unit of resume and of scheduling)", gt=0)


class OutputConfig(Section):
    base_dir: str = doc(
        "output", "published index (swapped in atomically at the end of a run); a folder or an s3:// / gs:// URI"
    )
    runs_dir: str = doc("runs", "work in progress and completion markers (what resume reads)")
    partition_rows: int = doc(500_000, "tables with more rows are written hive-partitioned", gt=0)
    max_failure_ratio: float = doc(
        0.2,
        "a step whose failed items exceed this share stops the run before "
        "publishing (the previous index stays; a re-run retries the failed items)",
        ge=0,
        le=1,
    )
    keep_versions: int = doc(
        3,
        "published versions kept under OUTPUT/versions (the newest is CURRENT; "
        "`graphrag-ray versions` lists them, `query --data` reads an older one)",
        ge=1,
    )


class CacheConfig(Section):
    enabled: bool = doc(True, "cache LLM responses so a re-run of the same work makes no calls")
    base_dir: str = doc(
        "cache",
        "cache folder relative to the root, or an s3:// / gs:// URI (on a cluster: shared storage every node sees)",
    )


class ReportingConfig(Section):
    ledger_file: str = doc("ledger.json", "usage ledger written next to the output at the end of each command")


class ServeConfig(Section):
    name: str | None = doc(None, "the index's name in model names (`<name>/local`); null: the root folder's name")
    api_key: SecretStr | None = doc(
        None,
        "clients must send `Authorization: Bearer <key>`; null: the "
        "GRAPHRAG_SERVE_API_KEY environment variable, and with neither the server is "
        "open to anyone who reaches it (said at start)",
    )
    replicas: int = doc(1, "replicas of this index's deployment (each loads the tables once)", gt=0)
    replica_cpus: float = doc(0.5, "CPUs Ray reserves for each replica (placing replicas over the nodes)", gt=0)
    max_ongoing_requests: int = doc(32, "questions one replica answers at once (they wait on the model)", gt=0)
    max_queued_requests: int = doc(
        64, "questions waiting for a replica; beyond them a request gets 429 with Retry-After", gt=0
    )
    retry_after_s: int = doc(2, "the Retry-After a refused request is given, in seconds", gt=0)
    max_body_bytes: int = doc(1 << 20, "a larger request body is refused with 413, unread", gt=0)
    max_field_chars: int = doc(
        200,
        "longest model name, response_type or role a request may send (the question: query.max_question_chars)",
        gt=0,
    )
    reload_check_s: float = doc(2.0, "how often a replica looks for a newly published version (CURRENT)", gt=0)
    ui_tasks: Literal["model", "skip"] = doc(
        "model",
        "a chat front end's background tasks (Open WebUI's title, tags, follow-up questions) are no GraphRAG "
        "questions: answered by the chat model directly (model), or with the empty answer their template asks "
        "for and no call (skip)",
    )


class Settings(Section):
    models: dict[str, ModelConfig] = Field(
        default_factory=_default_models, description="model entries, referred to by id from each stage"
    )
    input: InputConfig = doc(InputConfig(), "documents to index")
    chunks: ChunksConfig = doc(ChunksConfig(), "splitting documents into text units")
    extract_graph: ExtractGraphConfig = doc(ExtractGraphConfig(), "LLM extraction of entities and relationships")
    summarize_descriptions: SummarizeConfig = doc(SummarizeConfig(), "merging repeated descriptions")
    resolve_entities: ResolveEntitiesConfig = doc(ResolveEntitiesConfig(), "entity resolution (aliases)")
    cluster_graph: ClusterConfig = doc(ClusterConfig(), "hierarchical Leiden communities")
    community_reports: CommunityReportsConfig = doc(CommunityReportsConfig(), "community reports")
    extract_claims: ExtractClaimsConfig = doc(ExtractClaimsConfig(), "claims (covariates)")
    fast: FastConfig = doc(FastConfig(), "the `fast` method: NLP graph and extractive reports, no LLM")
    embed_text: EmbedConfig = doc(EmbedConfig(), "vector embeddings in LanceDB")
    workers: WorkersConfig = doc(WorkersConfig(), "Ray workers")
    batch: BatchConfig = doc(BatchConfig(), "indexing through the provider's Batch API (`index --batch`)")
    query: QueryConfig = doc(QueryConfig(), "defaults for every query method")
    local_search: LocalSearchConfig = doc(LocalSearchConfig(), "local search")
    global_search: GlobalSearchConfig = doc(GlobalSearchConfig(), "global search")
    drift_search: DriftSearchConfig = doc(DriftSearchConfig(), "DRIFT search")
    basic_search: BasicSearchConfig = doc(BasicSearchConfig(), "basic (vector RAG) search")
    output: OutputConfig = doc(OutputConfig(), "where tables go")
    cache: CacheConfig = doc(CacheConfig(), "LLM response cache")
    reporting: ReportingConfig = doc(ReportingConfig(), "usage reporting")
    serve: ServeConfig = doc(ServeConfig(), "`graphrag-ray serve`: the OpenAI- and Ollama-compatible endpoint")

    def model(self, model_id: str) -> ModelConfig:
        from graphrag_ray.errors import ConfigError

        if model_id not in self.models:
            raise ConfigError(f"models.{model_id}: no such model entry (have: {', '.join(sorted(self.models))})")
        return self.models[model_id]
