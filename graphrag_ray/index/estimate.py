"""`graphrag-ray estimate` / `index --dry-run`: what a run would call and cost, before anything is spent.

Documents, text units and extraction prompts are counted exactly (loaded and chunked here, no LLM). Later stages
depend on what extraction finds, so they are projected from the corpus's own named-entity structure, found
offline by the fast method's spotter (nlp/entities.py): how many distinct names there are (entities), how many
pairs are named in one sentence (relationships), and how many of each recur in several text units (those get a
summary call). A name repeated across the corpus is one entity, which per-unit ratios miss. The model will find
other names than the spotter - how far that moves the figures is the projection's assumption (`--rehearse`
measures a run against the simulator instead; the simulator answers from the same spotter, so their agreement
checks the arithmetic, not the assumption).
"""

from __future__ import annotations

import math

from dataclasses import dataclass, field

from graphrag_ray.config.settings import Settings
from graphrag_ray.parsing.llm_output import COMPLETION_DELIMITER
from graphrag_ray.exec.step import StepContext
from graphrag_ray.config.prompts import fill
from graphrag_ray.index.operations.extraction import extraction_prompt
from graphrag_ray.index.units import corpus_units
from graphrag_ray.llm.tokens import count_chat_tokens, tokenizer_for

# Projection ratios (assumptions, printed with the estimate)
COMPLETION_PER_UNIT_TOKEN = 0.60  # extraction output tokens per text-unit token, first pass
GLEANING_OUTPUT_SHARE = 0.30  # a gleaning pass returns this share of the first pass
MAX_NAMES_PER_UNIT = 40  # as the fast method keeps (a unit naming more is a list, not prose)
DESCRIPTIONS_PER_SUMMARY, DESCRIPTION_TOKENS = 2.5, 30  # a summary's input: this many descriptions of this size
SUMMARY_OUTPUT = 120
ENTITIES_PER_COMMUNITY = 5.0  # communities over all levels, per entity (hierarchical Leiden, size 10)
ENTITY_ROW_TOKENS, RELATIONSHIP_ROW_TOKENS = 25, 30  # a report context's table rows (id, name, description)
REPORT_OUTPUT = 700
# communities under 3 entities (pairs: hierarchical Leiden's leaves on a sparse graph), whose reports are written from
# their rows with no call at community_reports.min_llm_entities 3 (jobs/bench_cost.py's 100k corpus: 117 of 288)
SMALL_COMMUNITY_SHARE = 0.4
CANDIDATE_GROUP_SHARE = 0.03  # entity resolution: candidate groups per entity (measured: bench_index --resolve)
RESOLVE_CONTEXT, RESOLVE_OUTPUT = 400, 60


@dataclass
class StageEstimate:
    stage: str
    model: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: float
    exact: bool
    unpriced: str = ""  # the line saying its model's price is unknown (cost 0), if it is
    cached_tokens: int = 0  # of prompt_tokens: what a provider caching prompts as OpenAI does would serve cached


@dataclass
class Estimate:
    documents: int
    text_units: int
    corpus_tokens: int
    failures: int
    stages: list[StageEstimate] = field(default_factory=list)

    @property
    def total_cost(self) -> float:
        return sum(s.cost for s in self.stages)

    @property
    def unpriced(self) -> list[str]:
        """A line per model whose price is unknown (its cost is shown as $0)."""
        return list(dict.fromkeys(s.unpriced for s in self.stages if s.unpriced))

    @property
    def total_calls(self) -> int:
        return sum(s.calls for s in self.stages)

    def rich_table(self):
        from rich.table import Table

        table = Table(
            title=f"Estimate: {self.documents:,} documents, {self.text_units:,} text units, "
            f"{self.corpus_tokens:,} corpus tokens"
        )
        for col in ("stage", "model", "calls", "prompt tokens", "cached", "completion tokens", "cost $", "basis"):
            table.add_column(col, justify="left" if col in ("stage", "model", "basis") else "right")
        for s in self.stages:
            table.add_row(
                s.stage,
                s.model,
                f"{s.calls:,}",
                f"{s.prompt_tokens:,}",
                f"{s.cached_tokens:,}",
                f"{s.completion_tokens:,}",
                f"{s.cost:.4f}",
                "counted" if s.exact else "projected",
            )
        table.add_row(
            "total",
            "",
            f"{self.total_calls:,}",
            f"{sum(s.prompt_tokens for s in self.stages):,}",
            f"{sum(s.cached_tokens for s in self.stages):,}",
            f"{sum(s.completion_tokens for s in self.stages):,}",
            f"{self.total_cost:.4f}",
            "",
        )
        return table


def _stage(
    settings: Settings,
    stage: str,
    model_id: str,
    calls: float,
    prompt: float,
    completion: float,
    exact: bool,
    cached: float = 0,
) -> StageEstimate:
    from graphrag_ray.llm.prices import price_of, unknown_price_lines

    model = settings.model(model_id)
    cost = price_of(model).cost(int(round(prompt)), int(round(completion)), int(round(cached)))
    unpriced = "".join(unknown_price_lines(settings, [model_id]))
    return StageEstimate(
        stage,
        model.model,
        int(round(calls)),
        int(round(prompt)),
        int(round(completion)),
        cost,
        exact,
        unpriced,
        int(round(cached)),
    )


def cacheable(prompt_tokens: int) -> int:
    """Prompt tokens a provider caching as OpenAI does serves from its cache when a later prompt repeats this one
    whole (1,024 tokens at least, then in steps of 128)."""
    return 0 if prompt_tokens < 1024 else 1024 + (prompt_tokens - 1024) // 128 * 128


def estimate(ctx: StepContext, method: str = "standard") -> Estimate:
    settings = ctx.settings
    docs, units, failed = corpus_units(ctx)
    if method == "fast":  # no LLM: only the embeddings, of text units, entities and reports, when not local
        return _fast(ctx, docs, units, failed)
    ex = settings.extract_graph
    chat = settings.model(ex.model_id)
    tok = tokenizer_for(chat.model, chat.encoding)
    prompts = [count_chat_tokens(tok, [{"role": "user", "content": extraction_prompt(ctx, u["text"])}]) for u in units]
    first_prompt = sum(prompts)
    # each gleaning round resends the first prompt whole, then the names found: its prefix is the cached part
    glean_cached = sum(cacheable(p) for p in prompts) * ex.max_gleanings
    glean_extra = (
        tok.count(
            fill(ctx.prompt(ex.continue_prompt), extracted_names="x, " * 8, completion_delimiter=COMPLETION_DELIMITER)
        )
        + 4
    )
    corpus = sum(u["n_tokens"] for u in units)
    first_out = corpus * COMPLETION_PER_UNIT_TOKEN
    rounds = 1 + ex.max_gleanings
    result = Estimate(docs.height, len(units), corpus, failed)
    result.stages.append(
        _stage(
            settings,
            "extract_graph",
            ex.model_id,
            len(units) * rounds,
            first_prompt * rounds + glean_extra * len(units) * ex.max_gleanings,
            first_out * (1 + GLEANING_OUTPUT_SHARE * ex.max_gleanings),
            True,
            glean_cached,
        )
    )
    found = corpus_names(units)
    entities = float(found.entities)
    resolve = settings.resolve_entities
    if resolve.enabled:  # one call per candidate group, and the names embedded in batches
        groups = max(1.0, entities * CANDIDATE_GROUP_SHARE) if entities > 1 else 0.0  # at least one to ask
        result.stages.append(
            _stage(
                settings,
                "resolve_entities",
                resolve.model_id,
                groups,
                groups * (tok.count(ctx.prompt(resolve.prompt)) + RESOLVE_CONTEXT),
                groups * RESOLVE_OUTPUT,
                False,
            )
        )
        if resolve.similarity <= 1:
            names = settings.model(resolve.embedding_model_id)
            result.stages.append(
                _stage(
                    settings,
                    "resolve_entities_names",
                    resolve.embedding_model_id,
                    entities / names.batch_size,
                    entities * 6,
                    0,
                    False,
                )
            )
    merged = found.recurring
    summary_prompt = (
        tok.count(ctx.prompt(settings.summarize_descriptions.prompt)) + DESCRIPTIONS_PER_SUMMARY * DESCRIPTION_TOKENS
    )
    result.stages.append(
        _stage(
            settings,
            "summarize_descriptions",
            settings.summarize_descriptions.model_id,
            merged,
            merged * summary_prompt,
            merged * SUMMARY_OUTPUT,
            False,
        )
    )
    communities = max(1.0, entities / ENTITIES_PER_COMMUNITY)
    reported = communities * (1 - SMALL_COMMUNITY_SHARE if settings.community_reports.min_llm_entities >= 3 else 1)
    report_template = tok.count(ctx.prompt(settings.community_reports.prompt))
    per_entity = found.relationships / max(1, found.entities)
    report_context = min(
        settings.community_reports.max_input_length,
        ENTITIES_PER_COMMUNITY * (ENTITY_ROW_TOKENS + per_entity * RELATIONSHIP_ROW_TOKENS),
    )
    result.stages.append(
        _stage(
            settings,
            "community_reports",
            settings.community_reports.model_id,
            reported,
            reported * (report_template + report_context),
            reported * REPORT_OUTPUT,
            False,
        )
    )
    _embeddings(settings, result, len(units), corpus, entities, communities, REPORT_OUTPUT)
    return result


def _embeddings(
    settings: Settings,
    result: Estimate,
    units: int,
    corpus: int,
    entities: float,
    communities: float,
    report_tokens: float,
) -> None:
    if not settings.embed_text.enabled:
        return
    emb = settings.model(settings.embed_text.model_id)
    if emb.type == "local_embedding":  # computed here: no calls
        return
    # each target (text units, entities, reports) is embedded in batches of its own
    batches = sum(math.ceil(n / emb.batch_size) for n in (units, entities, communities) if n)
    emb_tokens = corpus + entities * 40 + communities * report_tokens
    result.stages.append(_stage(settings, "embed", settings.embed_text.model_id, batches, emb_tokens, 0, False))


def _fast(ctx: StepContext, docs, units: list[dict], failed: int) -> Estimate:
    """The fast method calls no chat model: its only calls are the embeddings (none with `local_embedding`)."""
    corpus = sum(u["n_tokens"] for u in units)
    result = Estimate(docs.height, len(units), corpus, failed)
    entities = float(corpus_names(units).entities)
    _embeddings(
        ctx.settings,
        result,
        len(units),
        corpus,
        entities,
        max(1.0, entities / ENTITIES_PER_COMMUNITY),
        REPORT_OUTPUT / 2,
    )  # an extractive report: the community's central sentences
    return result


@dataclass
class CorpusNames:
    entities: int  # distinct names
    relationships: int  # distinct pairs named in one sentence
    recurring: int  # names and pairs found in two or more text units (a summary call each)


def corpus_names(units: list[dict]) -> CorpusNames:
    """The corpus's named-entity structure, found offline (no LLM)."""
    from collections import Counter

    from graphrag_ray.nlp.entities import mentions, sentences

    name_units: Counter = Counter()
    pair_units: Counter = Counter()
    for unit in units:
        found = Counter(m.name.upper() if m.name.isascii() else m.name for m in mentions(unit["text"]))
        kept = sorted(found, key=lambda n: (-found[n], n))[:MAX_NAMES_PER_UNIT]
        name_units.update(kept)
        pairs = set()
        for _, sentence in sentences(unit["text"]):
            upper = sentence.upper()
            inside = sorted(n for n in kept if n in (upper if n.isascii() else sentence))
            pairs.update((a, b) for i, a in enumerate(inside) for b in inside[i + 1 :])
        pair_units.update(pairs)
    recurring = sum(1 for c in name_units.values() if c > 1) + sum(1 for c in pair_units.values() if c > 1)
    return CorpusNames(len(name_units), len(pair_units), recurring)
