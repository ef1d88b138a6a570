"""Merge the descriptions of each entity and relationship into one.

An LLM call is made only for an item with two or more distinct descriptions. When the list is longer than
the input budget, it is summarised in rolling rounds: the running summary plus the next descriptions that fit.
In an update, an item of many descriptions of which a few changed (a hub gaining a document's mentions) is revised
with one call from its previous summary and the changed descriptions (`revise_on_update`,
index/operations/descriptions.py): the update pays for the change, not the hub.
"""

from __future__ import annotations

import json

import polars as pl

from graphrag_ray.errors import LLMUnavailableError
from graphrag_ray.exec.step import ItemStep, Rows, StepContext, Tables, written_counts
from graphrag_ray.config.prompts import fill
from graphrag_ray.index.operations.descriptions import (SUMMARY_ROWS, add_revisions, description_digest,
                                                        with_summaries)
from graphrag_ray.llm.tokens import at_most_tokens

STAGE = "summarize_descriptions"


class SummarizeDescriptions(ItemStep):
    name = "summarize_descriptions"
    uses_llm, settings_section = True, "summarize_descriptions"
    prompt_keys, update_prompt_keys = ("prompt",), ("update_prompt",)
    reads = ("resolved_entities", "resolved_relationships", "text_units")
    writes = ("entities_summarized", "relationships_summarized")
    yields = {"summaries": SUMMARY_ROWS}
    carries_results = True  # an update takes unchanged items' rows from the version it updates

    def items(self, ctx: StepContext, tables: Tables, round_index: int, earlier: Tables) -> list[dict]:
        items = []
        for row in tables["resolved_entities"].filter(pl.col("descriptions").list.len() > 1).select(
                "id", "title", "descriptions").iter_rows(named=True):
            items.append({"item_id": row["id"], "names": row["title"], "descriptions": row["descriptions"]})
        for row in tables["resolved_relationships"].filter(pl.col("descriptions").list.len() > 1).select(
                "id", "source", "target", "descriptions").iter_rows(named=True):
            items.append({"item_id": row["id"], "names": json.dumps([row["source"], row["target"]],
                                                                    ensure_ascii=False),
                          "descriptions": row["descriptions"]})
        if ctx.previous is not None and ctx.settings.summarize_descriptions.revise_on_update:
            add_revisions(ctx, items, tables["text_units"])
        return items

    def carry_identity(self, item: dict):
        """What the summary is of: the names and descriptions (a revision is how it is written, not what of)."""
        return {k: v for k, v in item.items() if k != "revision"}

    async def process(self, ctx: StepContext, item: dict, models) -> Rows:
        cfg = ctx.settings.summarize_descriptions
        chat = models.chat(cfg.model_id)
        sources = sorted(description_digest(d) for d in item["descriptions"])
        if item.get("revision") is not None:
            return await self._revise(ctx, item, chat, sources)
        template = ctx.prompt(cfg.prompt)
        budget = max(200, cfg.max_input_tokens - chat.tokenizer.count_repeated(template))
        descriptions = sorted(item["descriptions"])
        sizes = [at_most_tokens(d) for d in descriptions]
        if sum(sizes) > budget:  # the byte bound cannot tell that they all fit in one call: count them
            sizes = [chat.tokenizer.count(d) for d in descriptions]
        pending = list(zip(descriptions, sizes))
        summary: str | None = None
        try:
            while pending:
                batch, used = ([summary] if summary else []), chat.tokenizer.count(summary or "")
                while pending and (used + pending[0][1] <= budget or len(batch) < 2):
                    used += pending[0][1]
                    batch.append(pending.pop(0)[0])
                prompt = fill(template, entity_name=item["names"], max_length=cfg.max_length,
                              description_list=json.dumps(batch, ensure_ascii=False))
                answer = await chat.chat([{"role": "user", "content": prompt}], stage=STAGE)
                summary = answer.content.strip() or summary
        except LLMUnavailableError as exc:
            return {"failures": [self.failure_row(item, exc, "kept the descriptions joined")],
                    "summaries": [{"id": item["item_id"], "description": "\n".join(item["descriptions"]),
                                   "sources": sources}]}
        return {"summaries": [{"id": item["item_id"], "description": summary or "", "sources": sources}]}

    async def _revise(self, ctx: StepContext, item: dict, chat, sources: list[str]) -> Rows:
        cfg, revision = ctx.settings.summarize_descriptions, item["revision"]
        prompt = fill(ctx.prompt(cfg.update_prompt), entity_name=item["names"], max_length=cfg.max_length,
                      previous_summary=revision["summary"],
                      added_descriptions=json.dumps(revision["added"], ensure_ascii=False),
                      removed_descriptions=json.dumps(revision["removed"], ensure_ascii=False))
        self.stat_update("revised")
        try:
            answer = await chat.chat([{"role": "user", "content": prompt}], stage=STAGE)
        except LLMUnavailableError as exc:
            return {"failures": [self.failure_row(item, exc, "kept the descriptions joined")],
                    "summaries": [{"id": item["item_id"], "description": "\n".join(item["descriptions"]),
                                   "sources": sources}]}
        return {"summaries": [{"id": item["item_id"], "description": answer.content.strip() or revision["summary"],
                               "sources": sources}]}

    def failure_source(self, item: dict) -> str:
        return item["names"]

    def update_lines(self, stats: dict) -> dict:
        return {"summaries_written": written_counts(stats)}

    def finish(self, ctx: StepContext, tables: Tables, yielded: Tables) -> Tables:
        return with_summaries(tables["resolved_entities"], tables["resolved_relationships"], yielded["summaries"])


STEP = SummarizeDescriptions()
