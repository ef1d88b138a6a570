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
from functools import cached_property

from graphrag_ray.config.settings import Settings
from graphrag_ray.exec.step import StepContext
from graphrag_ray.index.units import corpus_units

# Projection ratios (assumptions, printed with the estimate)
COMPLETION_PER_UNIT_TOKEN = 0.60  # extraction output tokens per text-unit token, first pass
GLEANING_OUTPUT_SHARE = 0.30  # a gleaning pass returns this share of the first pass
MAX_NAMES_PER_UNIT = 40  # as the fast method keeps (a unit naming more is a list, not prose)
DESCRIPTIONS_PER_SUMMARY, DESCRIPTION_TOKENS = 2.5, 30  # a summary's input: this many descriptions of this size
SUMMARY_OUTPUT = 120
CLAIMS_OUTPUT_PER_UNIT_TOKEN = 0.15  # claims answers per text-unit token (a unit states few claims; an assumption)
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


class Corpus:
    """What the steps estimate from: the corpus loaded and chunked as `index` does (counted), and what the
    projections derive from it - each worked out when a step first asks."""

    def __init__(self, ctx: StepContext, method_step_names: list[str]):
        self.ctx, self.settings = ctx, ctx.settings
        self.docs, self.units, self.failed = corpus_units(ctx)
        self.tokens = sum(u["n_tokens"] for u in self.units)
        # an extractive report (the fast method) is the community's central sentences: about half an LLM report
        self.report_tokens = REPORT_OUTPUT if "community_reports" in method_step_names else REPORT_OUTPUT / 2

    @cached_property
    def names(self) -> CorpusNames:
        return corpus_names(self.units)

    @property
    def entities(self) -> float:
        return float(self.names.entities)

    @property
    def communities(self) -> float:
        return max(1.0, self.entities / ENTITIES_PER_COMMUNITY)

    def stage(self, stage: str, model_id: str, calls, prompt, completion, exact: bool, cached=0) -> StageEstimate:
        return _stage(self.settings, stage, model_id, calls, prompt, completion, exact, cached)


def estimate(ctx: StepContext, method: str = "standard") -> Estimate:
    """Each step of the method estimates its own calls (`Step.estimate`), in the method's order, as a run calls
    them; a step that calls no model adds nothing."""
    from graphrag_ray.index.pipeline import INDEX_METHODS, method_steps

    steps = [step for step in method_steps(method) if step.enabled(ctx.settings)]
    corpus = Corpus(ctx, INDEX_METHODS[method])
    result = Estimate(corpus.docs.height, len(corpus.units), corpus.tokens, corpus.failed)
    for step in steps:
        result.stages += step.estimate(corpus)
    return result


def embeddings_estimate(corpus: Corpus) -> list[StageEstimate]:
    """The embed step's calls: text units, entities and reports, each target in batches of its own (none with
    `local_embedding`: computed here)."""
    settings = corpus.settings
    emb = settings.model(settings.embed_text.model_id)
    if emb.type == "local_embedding":
        return []
    counts = (len(corpus.units), corpus.entities, corpus.communities)
    batches = sum(math.ceil(n / emb.batch_size) for n in counts if n)
    tokens = corpus.tokens + corpus.entities * 40 + corpus.communities * corpus.report_tokens
    return [corpus.stage("embed", settings.embed_text.model_id, batches, tokens, 0, False)]


@dataclass
class CorpusNames:
    entities: int  # distinct names
    relationships: int  # distinct pairs named in one sentence
    units_per_name: dict[int, int]  # how many names and pairs are found in exactly n text units, by n

    def in_at_least(self, units: int) -> int:
        """Names and pairs found in `units` or more text units (a summary call each from summarize_from)."""
        return sum(count for n, count in self.units_per_name.items() if n >= units)


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
    return CorpusNames(len(name_units), len(pair_units), dict(Counter([*name_units.values(), *pair_units.values()])))
