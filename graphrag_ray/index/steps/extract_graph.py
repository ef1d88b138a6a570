"""Extract entities and relationships from each text unit with the LLM (Microsoft GraphRAG's tuple format).

Gleaning resends only the prompt (a cacheable prefix) plus the names already found, not the whole
conversation. Between gleaning rounds the model is asked whether more remain (the continue check). An
answer cut at max_tokens keeps its complete records; an answer with no usable record is asked again once (changed,
see ChatModel.chat); a text unit whose extraction cannot be had is listed in `failures`.
"""

from __future__ import annotations

import logging

import polars as pl

from graphrag_ray.config.prompts import fill
from graphrag_ray.errors import UnusableAnswerError
from graphrag_ray.exec.step import ItemStep, Rows, StepContext, Tables
from graphrag_ray.index.operations.documents import units_with_titles
from graphrag_ray.index.operations.extraction import extraction_prompt
from graphrag_ray.nlp.entities import sentences, titles_of
from graphrag_ray.parsing.llm_output import (
    COMPLETION_DELIMITER,
    Extraction,
    example_names,
    parse_tuples,
    says_none,
    without_copies,
)
from graphrag_ray.storage.schemas import RUN_SCHEMAS

log = logging.getLogger(__name__)
STAGE = "extract_graph"
LOOP_PROMPT = (
    "It appears some entities and relationships may have still been missed. Answer Y if there are "
    "still entities or relationships that need to be added, or N if there are none. Please answer "
    "with a single letter Y or N.\n"
)


class ExtractGraph(ItemStep):
    name = "extract_graph"
    uses_llm, settings_section = True, "extract_graph"
    prompt_keys = ("prompt", "continue_prompt")
    reads = ("text_units", "documents")
    writes = ("extracted_entities", "extracted_relationships")
    yields = {name: RUN_SCHEMAS[name] for name in ("extracted_entities", "extracted_relationships")}
    carries_results = True  # an update takes unchanged items' rows from the version it updates

    def estimate(self, corpus) -> list:
        """Counted: every unit's extraction prompt; each gleaning round resends it whole (its prefix is what a
        caching provider serves cached) with the names found; the answers are projected."""
        from graphrag_ray.index.estimate import COMPLETION_PER_UNIT_TOKEN, GLEANING_OUTPUT_SHARE, cacheable
        from graphrag_ray.llm.tokens import count_chat_tokens, tokenizer_for

        ctx, ex = corpus.ctx, corpus.settings.extract_graph
        chat = corpus.settings.model(ex.model_id)
        tok = tokenizer_for(chat.model, chat.encoding)
        prompts = [
            count_chat_tokens(tok, [{"role": "user", "content": extraction_prompt(ctx, u["text"])}])
            for u in corpus.units
        ]
        continue_prompt = fill(
            ctx.prompt(ex.continue_prompt), extracted_names="x, " * 8, completion_delimiter=COMPLETION_DELIMITER
        )
        glean_extra = tok.count(continue_prompt) + 4
        rounds, units = 1 + ex.max_gleanings, len(corpus.units)
        first_out = corpus.tokens * COMPLETION_PER_UNIT_TOKEN
        return [
            corpus.stage(
                STAGE,
                ex.model_id,
                units * rounds,
                sum(prompts) * rounds + glean_extra * units * ex.max_gleanings,
                first_out * (1 + GLEANING_OUTPUT_SHARE * ex.max_gleanings),
                True,
                sum(cacheable(p) for p in prompts) * ex.max_gleanings,
            )
        ]

    def items(self, ctx: StepContext, tables: Tables, round_index: int, earlier: Tables) -> pl.DataFrame:
        return units_with_titles(tables).select(
            pl.col("id").alias("item_id"), "text", "document_id", "document_title", "document_head"
        )

    async def process(self, ctx: StepContext, item: dict, models) -> Rows:
        cfg = ctx.settings.extract_graph
        chat = models.chat(cfg.model_id)
        first = [{"role": "user", "content": extraction_prompt(ctx, item["text"])}]
        examples = example_names(extraction_prompt(ctx, ""))

        def own(content: str) -> Extraction:
            """The answer's records, less those copied from the prompt's example (counted)."""
            kept, copied = without_copies(parse_tuples(content), examples, item["text"])
            self.stat_update("example_copies_dropped", copied)
            return kept

        def usable(content: str) -> bool:  # an answer that only re-prints the example is unusable
            return bool(without_copies(parse_tuples(content), examples, item["text"])[0].records) or says_none(content)

        # an answer cut at max_tokens keeps its complete records (gleaning asks for the rest)
        answer = await chat.chat(first, stage=STAGE, validate=usable)
        self.stat_update("cut_answers", int(answer.cut))
        found = own(answer.content)
        try:
            await self._glean(ctx, chat, first, answer.content, found, usable, own)
        except UnusableAnswerError as exc:
            # a gleaning answered twice in prose ("I apologize for the oversight...") ends gleaning for this unit;
            # what the first answer and earlier gleanings found stands
            self.stat_update("gleanings_unusable")
            log.info("text unit %s: gleaning ended by an unusable answer (%s)", item["item_id"], exc)
        # the endpoint failing mid-gleaning (LLMUnavailableError) fails the unit: it is retried whole
        return self._rows(item, found)

    async def _glean(
        self, ctx: StepContext, chat, first: list[dict], answer: str, found: Extraction, usable, own
    ) -> None:
        """Ask for what the answers so far missed, up to max_gleanings rounds, adding to `found`: after the prompt
        and the names found (`gleaning_layout: names`), or after the prompt and the answers themselves."""
        cfg = ctx.settings.extract_graph
        conversation = cfg.gleaning_layout == "conversation"
        before = [*first, {"role": "assistant", "content": answer}] if conversation else first
        for round_index in range(cfg.max_gleanings):
            names = sorted({e["title"] for e in found.entities})
            more = [
                {
                    "role": "user",
                    "content": fill(
                        ctx.prompt(cfg.continue_prompt),
                        extracted_names="the records above" if conversation else ", ".join(names) or "(none)",
                        completion_delimiter=COMPLETION_DELIMITER,
                    ),
                }
            ]
            glean = await chat.chat(before + more, stage=STAGE, validate=usable)
            self.stat_update("cut_answers", int(glean.cut))
            self.stat_update("gleaning_rounds")
            extra = own(glean.content)
            found.add(extra)
            if not (extra.entities or extra.relationships) or round_index == cfg.max_gleanings - 1:
                return
            check = await chat.chat(
                before
                + more
                + [{"role": "assistant", "content": glean.content}, {"role": "user", "content": LOOP_PROMPT}],
                stage=STAGE,
                max_tokens=1,
            )
            if not check.content.strip().upper().startswith("Y"):
                return
            if conversation:
                before = [*before, *more, {"role": "assistant", "content": glean.content}]

    def _rows(self, item: dict, found: Extraction) -> Rows:
        rows: Rows = {"extracted_entities": [], "extracted_relationships": [], "failures": []}
        if found.unparsed:
            self.stat_update("unparsed_records", found.unparsed)
            log.info(
                "text unit %s: %d unparseable extraction records (e.g. %r)",
                item["item_id"],
                found.unparsed,
                found.unparsed_samples[:1],
            )
        if found.unparsed and not (found.entities or found.relationships):
            rows["failures"].append(
                self.failure_row(item, f"no parseable records in the answer ({found.unparsed} unparseable)")
            )
            return rows
        titled = titled_entities(item, found.entities)
        self.stat_update("title_entities_added", len(titled))
        found.entities.extend(titled)
        self.stat_update("entity_mentions", len(found.entities))
        self.stat_update("relationship_mentions", len(found.relationships))
        for order, e in enumerate(found.entities):
            rows["extracted_entities"].append({**e, "text_unit_id": item["item_id"], "order": order})
        for order, r in enumerate(found.relationships):
            rows["extracted_relationships"].append({**r, "text_unit_id": item["item_id"], "order": order})
        return rows

    def finish(self, ctx: StepContext, tables: Tables, yielded: Tables) -> Tables:
        return {
            "extracted_entities": yielded["extracted_entities"],
            "extracted_relationships": yielded["extracted_relationships"],
        }


def titled_entities(item: dict, extracted: list[dict]) -> list[dict]:
    """The unit's titles (its document's, one on its document's first line) that the model did not name: entities
    of the unit by its place, as in the fast method - a page links to its title whether or not a model lists it
    ("Me and Bobby McGee", a song, with a lower-case "and"). Described by the first sentence naming it, else the
    text's first."""
    named = {e["title"].casefold() for e in extracted}
    spans = [span for _, span in sentences(item["text"])] or [item["text"]]
    out = []
    for title in titles_of(item["text"], item.get("document_title"), item.get("document_head") or ""):
        if title.casefold() in named:
            continue
        naming = [span for span in spans if title.casefold() in span.casefold()]
        description = (naming or spans)[0].strip()[:300]
        out.append({"title": title.upper() if title.isascii() else title, "type": "TITLE", "description": description})
    return out


STEP = ExtractGraph()
