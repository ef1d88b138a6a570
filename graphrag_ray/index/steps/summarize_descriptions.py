"""Merge the descriptions of each entity and relationship into one.

An LLM call is made only for an item with two or more distinct descriptions. When the list is longer than
the input budget, it is summarised in rolling rounds: the running summary plus the next descriptions that fit.
"""

from __future__ import annotations

import json

import polars as pl

from graphrag_ray.errors import LLMUnavailableError
from graphrag_ray.exec.step import ItemStep, Rows, StepContext, Tables
from graphrag_ray.config.prompts import fill
from graphrag_ray.index.operations.descriptions import SUMMARY_ROWS, with_summaries
from graphrag_ray.llm.tokens import at_most_tokens

STAGE = "summarize_descriptions"


class SummarizeDescriptions(ItemStep):
    name = "summarize_descriptions"
    uses_llm, settings_section = True, "summarize_descriptions"
    prompt_keys = ("prompt",)
    reads = ("resolved_entities", "resolved_relationships")
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
        return items

    async def process(self, ctx: StepContext, item: dict, models) -> Rows:
        cfg = ctx.settings.summarize_descriptions
        chat = models.chat(cfg.model_id)
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
                    "summaries": [{"id": item["item_id"], "description": "\n".join(item["descriptions"])}]}
        return {"summaries": [{"id": item["item_id"], "description": summary or ""}]}

    def failure_source(self, item: dict) -> str:
        return item["names"]

    def finish(self, ctx: StepContext, tables: Tables, yielded: Tables) -> Tables:
        return with_summaries(tables["resolved_entities"], tables["resolved_relationships"], yielded["summaries"])


STEP = SummarizeDescriptions()
