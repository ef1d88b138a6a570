"""`graphrag-ray estimate` / `index --dry-run`: what a run would call and cost, before anything is spent.

Documents, text units and extraction prompts are counted exactly (loaded and chunked here, no LLM). Later
stages depend on what extraction finds, so they are projected with the ratios below (typical of GraphRAG
runs on prose; `--rehearse` measures them instead, against the simulator).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from graphrag_ray.config.settings import Settings
from graphrag_ray.parsing.llm_output import COMPLETION_DELIMITER
from graphrag_ray.exec.step import StepContext
from graphrag_ray.config.prompts import fill
from graphrag_ray.index.steps.extract_graph import extraction_prompt
from graphrag_ray.index.units import corpus_units
from graphrag_ray.llm.tokens import count_chat_tokens, tokenizer_for

# Projection ratios (assumptions, printed with the estimate)
COMPLETION_PER_UNIT_TOKEN = 0.60     # extraction output tokens per text-unit token, first pass
GLEANING_OUTPUT_SHARE = 0.30         # a gleaning pass returns this share of the first pass
ENTITIES_PER_UNIT = 10.0
RELATIONSHIPS_PER_ENTITY = 1.2
SUMMARIZED_SHARE = 0.25              # entities/relationships with 2+ distinct descriptions
SUMMARY_PROMPT, SUMMARY_OUTPUT = 450, 120
ENTITIES_PER_COMMUNITY = 4.0
REPORT_CONTEXT, REPORT_OUTPUT = 1500, 700
CANDIDATE_GROUP_SHARE = 0.03         # entity resolution: candidate groups per entity (measured: bench_index --resolve)
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
    def total_calls(self) -> int:
        return sum(s.calls for s in self.stages)

    def rich_table(self):
        from rich.table import Table

        table = Table(title=f"Estimate: {self.documents:,} documents, {self.text_units:,} text units, "
                            f"{self.corpus_tokens:,} corpus tokens")
        for col in ("stage", "model", "calls", "prompt tokens", "completion tokens", "cost $", "basis"):
            table.add_column(col, justify="left" if col in ("stage", "model", "basis") else "right")
        for s in self.stages:
            table.add_row(s.stage, s.model, f"{s.calls:,}", f"{s.prompt_tokens:,}", f"{s.completion_tokens:,}",
                          f"{s.cost:.4f}", "counted" if s.exact else "projected")
        table.add_row("total", "", f"{self.total_calls:,}", f"{sum(s.prompt_tokens for s in self.stages):,}",
                      f"{sum(s.completion_tokens for s in self.stages):,}", f"{self.total_cost:.4f}", "")
        return table


def _stage(settings: Settings, stage: str, model_id: str, calls: float, prompt: float, completion: float,
           exact: bool) -> StageEstimate:
    model = settings.model(model_id)
    cost = (prompt * model.price.input_per_1m + completion * model.price.output_per_1m) / 1e6
    return StageEstimate(stage, model.model, int(round(calls)), int(round(prompt)), int(round(completion)), cost,
                         exact)


def estimate(ctx: StepContext) -> Estimate:
    settings = ctx.settings
    docs, units, failed = corpus_units(ctx)
    ex = settings.extract_graph
    chat = settings.model(ex.model_id)
    tok = tokenizer_for(chat.model, chat.encoding)
    first_prompt = sum(count_chat_tokens(tok, [{"role": "user", "content": extraction_prompt(ctx, u["text"])}])
                       for u in units)
    glean_extra = tok.count(fill(ctx.prompt(ex.continue_prompt), extracted_names="x, " * 8,
                                 completion_delimiter=COMPLETION_DELIMITER)) + 4
    corpus = sum(u["n_tokens"] for u in units)
    first_out = corpus * COMPLETION_PER_UNIT_TOKEN
    rounds = 1 + ex.max_gleanings
    result = Estimate(docs.height, len(units), corpus, failed)
    result.stages.append(_stage(settings, "extract_graph", ex.model_id, len(units) * rounds,
                                first_prompt * rounds + glean_extra * len(units) * ex.max_gleanings,
                                first_out * (1 + GLEANING_OUTPUT_SHARE * ex.max_gleanings), True))
    entities = len(units) * ENTITIES_PER_UNIT
    resolve = settings.resolve_entities
    if resolve.enabled:  # one call per candidate group, and the names embedded in batches
        groups = entities * CANDIDATE_GROUP_SHARE
        result.stages.append(_stage(settings, "resolve_entities", resolve.model_id, groups,
                                    groups * (tok.count(ctx.prompt(resolve.prompt)) + RESOLVE_CONTEXT),
                                    groups * RESOLVE_OUTPUT, False))
        if resolve.similarity <= 1:
            names = settings.model(resolve.embedding_model_id)
            result.stages.append(_stage(settings, "resolve_entities_names", resolve.embedding_model_id,
                                        entities / names.batch_size, entities * 6, 0, False))
    merged = entities * (1 + RELATIONSHIPS_PER_ENTITY) * SUMMARIZED_SHARE
    result.stages.append(_stage(settings, "summarize_descriptions", settings.summarize_descriptions.model_id,
                                merged, merged * SUMMARY_PROMPT, merged * SUMMARY_OUTPUT, False))
    communities = max(1.0, entities / ENTITIES_PER_COMMUNITY)
    report_template = tok.count(ctx.prompt(settings.community_reports.prompt))
    result.stages.append(_stage(settings, "community_reports", settings.community_reports.model_id, communities,
                                communities * (report_template + REPORT_CONTEXT), communities * REPORT_OUTPUT, False))
    if settings.embed_text.enabled:
        emb = settings.model(settings.embed_text.model_id)
        texts = len(units) + entities + communities
        emb_tokens = corpus + entities * 40 + communities * REPORT_OUTPUT
        result.stages.append(_stage(settings, "embed", settings.embed_text.model_id, texts / emb.batch_size,
                                    emb_tokens, 0, False))
    return result
