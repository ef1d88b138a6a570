"""Claims (covariates) about entities, per text unit; optional and off by default (as in GraphRAG).

Same robustness as graph extraction: a cut-short answer keeps its complete records, one with none is asked again
once (changed), a text unit whose claims cannot be had is
listed in `failures`, unparseable records are counted and logged."""

from __future__ import annotations

import logging

import polars as pl

from graphrag_ray.config.prompts import fill
from graphrag_ray.errors import UnusableAnswerError
from graphrag_ray.exec.items import Items
from graphrag_ray.exec.step import ItemStep, Rows, StepContext, Tables
from graphrag_ray.ids import content_id
from graphrag_ray.parsing.llm_output import (
    COMPLETION_DELIMITER,
    RECORD_DELIMITER,
    TUPLE_DELIMITER,
    claim_records,
    claims_say_none,
)

log = logging.getLogger(__name__)
STAGE = "extract_claims"
CLAIM_FIELDS = ("subject_id", "object_id", "type", "status", "start_date", "end_date", "description", "source_text")
CLAIM_SCHEMAS = {
    "claims": {
        "subject_id": pl.String,
        "object_id": pl.String,
        "type": pl.String,
        "status": pl.String,
        "start_date": pl.String,
        "end_date": pl.String,
        "description": pl.String,
        "source_text": pl.String,
        "text_unit_id": pl.String,
        "order": pl.Int64,
    }
}


def parse_claims(output: str) -> tuple[list[dict], int]:
    records, unparsed = claim_records(output)
    claims = []
    for fields in records:
        claim = dict(zip(CLAIM_FIELDS, (fields + [""])[:8]))
        for key in ("object_id", "start_date", "end_date"):
            if claim[key].upper() == "NONE":
                claim[key] = None
        claims.append(claim)
    return claims, unparsed


def usable_claims(output: str) -> bool:
    """At least one claim parses, or the answer says there are none."""
    return bool(parse_claims(output)[0]) or claims_say_none(output)


def claims_prompt(ctx: StepContext, text: str) -> str:
    cfg = ctx.settings.extract_claims
    return fill(
        ctx.prompt(cfg.prompt),
        entity_specs=", ".join(ctx.settings.extract_graph.entity_types),
        claim_description=cfg.description,
        input_text=text,
        tuple_delimiter=TUPLE_DELIMITER,
        record_delimiter=RECORD_DELIMITER,
        completion_delimiter=COMPLETION_DELIMITER,
    )


class ExtractClaims(ItemStep):
    name = "extract_claims"
    uses_llm, settings_section = True, "extract_claims"
    prompt_keys = ("prompt",)
    reads = ("text_units",)
    writes = publishes = ("covariates",)
    yields = CLAIM_SCHEMAS
    carries_results = True  # an update takes unchanged items' rows from the version it updates

    def items(self, ctx: StepContext, tables: Tables, round_index: int, earlier: Tables) -> Items:
        if not ctx.settings.extract_claims.enabled:
            return []
        return tables["text_units"].select(pl.col("id").alias("item_id"), "text", "document_id")

    async def process(self, ctx: StepContext, item: dict, models) -> Rows:
        cfg = ctx.settings.extract_claims
        chat = models.chat(cfg.model_id)
        first = [{"role": "user", "content": claims_prompt(ctx, item["text"])}]
        answer = await chat.chat(first, stage=STAGE, validate=usable_claims)
        claims, unparsed = parse_claims(answer.content)
        for _ in range(cfg.max_gleanings):
            more = [
                {
                    "role": "user",
                    "content": "MANY claims were missed in the last extraction. Add only the "
                    f"missed ones below using the same format, then {COMPLETION_DELIMITER}.",
                }
            ]
            try:
                glean = await chat.chat(first + more, stage=STAGE, validate=usable_claims)
            except UnusableAnswerError:  # gleaning ends; the claims found so far stand
                self.stat_update("gleanings_unusable")
                break
            extra, bad = parse_claims(glean.content)
            claims, unparsed = claims + extra, unparsed + bad
            if not extra:
                break
        if unparsed:
            self.stat_update("unparsed_records", unparsed)
            log.info("text unit %s: %d unparseable claim records", item["item_id"], unparsed)
        self.stat_update("claims", len(claims))
        return {"claims": [{**c, "text_unit_id": item["item_id"], "order": i} for i, c in enumerate(claims)]}

    def estimate(self, corpus) -> list:
        """Counted: every unit's claims prompt, resent whole by each gleaning round; the answers projected as a
        short share of the unit (most units state few claims)."""
        from graphrag_ray.index.estimate import CLAIMS_OUTPUT_PER_UNIT_TOKEN, cacheable
        from graphrag_ray.llm.tokens import count_chat_tokens, tokenizer_for

        cfg = corpus.settings.extract_claims
        chat = corpus.settings.model(cfg.model_id)
        tok = tokenizer_for(chat.model, chat.encoding)
        prompts = [
            count_chat_tokens(tok, [{"role": "user", "content": claims_prompt(corpus.ctx, u["text"])}])
            for u in corpus.units
        ]
        rounds = 1 + cfg.max_gleanings
        return [
            corpus.stage(
                STAGE,
                cfg.model_id,
                len(prompts) * rounds,
                sum(prompts) * rounds,
                corpus.tokens * CLAIMS_OUTPUT_PER_UNIT_TOKEN * rounds,
                True,
                sum(cacheable(p) for p in prompts) * cfg.max_gleanings,
            )
        ]

    def finish(self, ctx: StepContext, tables: Tables, yielded: Tables) -> Tables:
        claims = yielded["claims"].unique(
            subset=["text_unit_id", "subject_id", "object_id", "type", "description"], keep="first", maintain_order=True
        )
        order = tables["text_units"].select(pl.col("id").alias("text_unit_id"), pl.col("human_readable_id").alias("u"))
        claims = claims.join(order, on="text_unit_id").sort("u", "order").drop("u", "order")
        claims = claims.with_columns(
            pl.struct("text_unit_id", "subject_id", "object_id", "type", "description")
            .map_elements(lambda s: content_id("claim", *s.values()), return_dtype=pl.String)
            .alias("id"),
            pl.int_range(pl.len()).cast(pl.Int64).alias("human_readable_id"),
            pl.lit("claim").alias("covariate_type"),
        )
        return {
            "covariates": claims.select(
                "id",
                "human_readable_id",
                "covariate_type",
                "type",
                "description",
                "subject_id",
                "object_id",
                "status",
                "start_date",
                "end_date",
                "source_text",
                "text_unit_id",
            )
        }


STEP = ExtractClaims()
