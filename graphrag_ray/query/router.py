"""`--method auto`: route a question to local, global or hybrid.

Strong signals decide alone: an entity of the index named in the question (local), words asking about the
whole corpus (global), both (hybrid). Otherwise one cheap classification call decides; with no chat model, or
if that call fails, the rule-based guess stands.
"""

from __future__ import annotations

import re

from graphrag_ray.config.prompts import fill
from graphrag_ray.errors import GraphRagRayError
from graphrag_ray.parsing.llm_output import parse_json_object
from graphrag_ray.query.index_data import IndexData

CORPUS_WIDE = re.compile(
    r"\b(main|overall|key|major|common|recurring)\s+(themes?|topics?|trends?|ideas?|points?)\b"
    r"|\b(whole|entire)\s+(dataset|corpus|collection)\b|\bsummar(y|ize|ise)\b|\boverview\b"
    r"|主要|整体|总体|总结|概括|主题|趋势|全局|整個|總體|主題",
    re.I,
)


def named_entities(question: str, data: IndexData) -> list[str]:
    lowered = question.casefold()
    return [t for t in data.entity_by_title if len(t) >= 2 and t.casefold() in lowered]


def rule_route(question: str, data: IndexData) -> tuple[str, str]:
    names = named_entities(question, data)
    wide = bool(CORPUS_WIDE.search(question))
    if names and wide:
        return "hybrid", f"names {', '.join(names[:3])} and asks about the whole corpus"
    if names:
        return "local", f"names {', '.join(names[:3])}"
    if wide:
        return "global", "asks about the corpus as a whole"
    return "", "no strong signal"


async def route(question: str, data: IndexData, models, settings, root=None, use_llm: bool = True) -> tuple[str, str]:
    choice, reason = rule_route(question, data)
    if choice:
        return choice, f"rule: {reason}"
    if use_llm:
        from graphrag_ray.config.prompts import load_prompt

        try:
            answer = await models.chat(settings.global_search.chat_model_id).chat(
                [{"role": "user", "content": fill(load_prompt(root, settings.query.router_prompt), question=question)}],
                stage="query_route",
                json_mode=True,
                max_tokens=100,
            )
            data_ = parse_json_object(answer.content) or {}
            if data_.get("route") in ("local", "global", "hybrid"):
                return data_["route"], f"classifier: {data_.get('reason', '')}".strip()
        except GraphRagRayError:
            pass
    return "local", "fallback: no entity or corpus-wide cue; local search is the cheaper default"
