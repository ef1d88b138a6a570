"""The `fast` method's description merge, with no LLM: the first distinct sentences, in text order."""

from __future__ import annotations

import polars as pl

from graphrag_ray.exec.step import BatchStep, StepContext, Tables
from graphrag_ray.index.steps.summarize_descriptions import STEP as SUMMARIZE


class JoinDescriptions(BatchStep):
    name = "join_descriptions"
    reads = ("merged_entities", "merged_relationships")
    writes = ("entities_summarized", "relationships_summarized")

    def run(self, ctx: StepContext, tables: Tables) -> Tables:
        keep = ctx.settings.fast.max_description_sentences
        trimmed = {name: tables[name].with_columns(pl.col("descriptions").list.head(keep))
                   for name in ("merged_entities", "merged_relationships")}
        return SUMMARIZE.finish(ctx, trimmed, {"summaries": pl.DataFrame(schema=SUMMARIZE.yields["summaries"])})


STEP = JoinDescriptions()
