"""The extraction prompt as the extraction step sends it (estimate counts the same text)."""

from __future__ import annotations

from graphrag_ray.config.prompts import fill
from graphrag_ray.exec.step import StepContext
from graphrag_ray.parsing.llm_output import COMPLETION_DELIMITER, RECORD_DELIMITER, TUPLE_DELIMITER


def extraction_prompt(ctx: StepContext, text: str) -> str:
    cfg = ctx.settings.extract_graph
    return fill(
        ctx.prompt(cfg.prompt),
        entity_types=",".join(t.upper() for t in cfg.entity_types),
        input_text=text,
        tuple_delimiter=TUPLE_DELIMITER,
        record_delimiter=RECORD_DELIMITER,
        completion_delimiter=COMPLETION_DELIMITER,
    )
