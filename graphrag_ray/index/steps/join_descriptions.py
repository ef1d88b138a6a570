"""The `fast` method's description merge, with no LLM: the first distinct sentences, in text order."""

from __future__ import annotations

import polars as pl

from graphrag_ray.exec.step import BatchStep, StepContext, Tables
from graphrag_ray.index.operations.descriptions import with_summaries


class JoinDescriptions(BatchStep):
    name = "join_descriptions"
    settings_section = "fast"
    reads = ("merged_entities", "merged_relationships")
    # the resolved_* tables are the merged ones here (no resolution): what the communities step reads
    writes = ("entities_summarized", "relationships_summarized", "resolved_entities", "resolved_relationships")

    def run(self, ctx: StepContext, tables: Tables) -> Tables:
        keep = ctx.settings.fast.max_description_sentences
        # the fast method has no resolution step: its merged tables are what the standard method resolves
        trimmed = {
            f"resolved_{kind}": tables[f"merged_{kind}"].with_columns(pl.col("descriptions").list.head(keep))
            for kind in ("entities", "relationships")
        }
        return {**with_summaries(trimmed["resolved_entities"], trimmed["resolved_relationships"]), **trimmed}


STEP = JoinDescriptions()
