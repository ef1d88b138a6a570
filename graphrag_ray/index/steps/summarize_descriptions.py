"""Merge the descriptions of each entity and relationship into one.

An LLM call is made only for an item with `summarize_from` (4) or more distinct descriptions, or whose descriptions
together pass the summary's `max_length`: fewer and shorter are joined as they are (LightRAG's rule). When the list
is longer than the input budget, it is summarised in rolling rounds: the running summary plus the next descriptions
that fit.
In an update, an item of many descriptions of which a few changed (a hub gaining a document's mentions) is revised
from its previous summary and the changed descriptions (`revise_on_update`, index/operations/descriptions.py),
and up to `revisions_per_call` such revisions of one partition share a call, answered as one JSON object (an item
the answer leaves out is revised alone): the update pays for the change, not the hub, nor a call per small change.
An item that only gained a few descriptions (a hub named in the new documents: `keep_max_added_share`) keeps its
summary, with no call, until the additions grow; a removed description is always revised out.
An update's other changed items of short descriptions are written in those shared calls too, from no current
description.
"""

from __future__ import annotations

import asyncio
import json

import polars as pl

from graphrag_ray.config.prompts import fill
from graphrag_ray.errors import LLMUnavailableError
from graphrag_ray.exec.items import Items
from graphrag_ray.exec.step import ItemStep, Rows, StepContext, Tables, written_counts
from graphrag_ray.index.operations.descriptions import SUMMARY_ROWS, add_revisions, description_digest, with_summaries
from graphrag_ray.llm.tokens import at_most_tokens
from graphrag_ray.parsing.llm_output import parse_json_object

STAGE = "summarize_descriptions"
ANSWER_SHARE = 0.8  # of the chat model's max_tokens a shared answer is planned to fill (JSON keys, rewording)
TOKENS_PER_WORD = 1.4  # an English word in tokens, for max_length (words) as an answer's length
ENTRY_OVERHEAD = 8  # an answer entry's key, quotes and comma


class SummarizeDescriptions(ItemStep):
    name = "summarize_descriptions"
    uses_llm, settings_section = True, "summarize_descriptions"
    prompt_keys, update_prompt_keys = ("prompt",), ("update_prompt", "update_batch_prompt")
    update_keys = ("revise_on_update",)
    reads = ("resolved_entities", "resolved_relationships", "text_units")
    read_columns = {"text_units": ("id",)}  # an update: which text units are gone
    writes = ("entities_summarized", "relationships_summarized")
    yields = {"summaries": SUMMARY_ROWS}
    carries_results = True  # an update takes unchanged items' rows from the version it updates

    def estimate(self, corpus) -> list:
        """Projected: a summary per name and pair found in `summarize_from` or more text units (the corpus's own
        names)."""
        from graphrag_ray.index.estimate import DESCRIPTION_TOKENS, DESCRIPTIONS_PER_SUMMARY, SUMMARY_OUTPUT
        from graphrag_ray.llm.tokens import tokenizer_for

        cfg = corpus.settings.summarize_descriptions
        chat = corpus.settings.model(cfg.model_id)
        tok = tokenizer_for(chat.model, chat.encoding)
        merged = corpus.names.in_at_least(cfg.summarize_from)
        prompt = tok.count(corpus.ctx.prompt(cfg.prompt)) + DESCRIPTIONS_PER_SUMMARY * DESCRIPTION_TOKENS
        return [corpus.stage(self.name, cfg.model_id, merged, merged * prompt, merged * SUMMARY_OUTPUT, False)]

    def items(self, ctx: StepContext, tables: Tables, round_index: int, earlier: Tables) -> Items:
        """Every entity and relationship the model summarises (`summarize_from` distinct descriptions, or longer
        than a summary may be): a frame of items (exec/items.py), or in an update that revises, their dicts with
        the revisions added. The others' descriptions are joined as they are (with_summaries)."""
        cfg = ctx.settings.summarize_descriptions
        many = (pl.col("descriptions").list.unique().list.len() >= cfg.summarize_from) | (
            (pl.col("descriptions").list.len() > 1)
            & (pl.col("descriptions").list.join(" ").str.count_matches(r"\S+") > cfg.max_length)
        )
        entities = (
            tables["resolved_entities"]
            .filter(many)
            .select(pl.col("id").alias("item_id"), pl.col("title").alias("names"), "descriptions")
        )
        relationships = tables["resolved_relationships"].filter(many).select("id", "source", "target", "descriptions")
        names = [  # as json.dumps([source, target], ensure_ascii=False) writes them: an item's key is its content
            json.dumps(pair, ensure_ascii=False) for pair in relationships.select("source", "target").iter_rows()
        ]
        relationships = relationships.select(
            pl.col("id").alias("item_id"), pl.Series("names", names, dtype=pl.String), "descriptions"
        )
        items = pl.concat([entities, relationships])
        if ctx.previous is None or not cfg.revise_on_update:
            return items
        items = items.to_dicts()
        add_revisions(ctx, items, tables["text_units"], self._shared_call_saving(ctx))
        if cfg.revisions_per_call > 1:
            _write_small_ones_in_shared_calls(items, cfg.max_input_tokens // 2)
        return items

    def _shared_call_saving(self, ctx: StepContext) -> int | None:
        """Bytes of prompt a revision in a shared call saves over a fresh summary's call: the fresh template, less
        a share of the shared template and the revision's own keys (None: revisions do not share calls)."""
        cfg = ctx.settings.summarize_descriptions
        if cfg.revisions_per_call < 2:
            return None
        keys = json.dumps(_revision_entry(0, {"names": "", "revision": {"summary": "", "added": [], "removed": []}}))
        return (
            len(ctx.prompt(cfg.prompt).encode())
            - len(ctx.prompt(cfg.update_batch_prompt).encode()) // cfg.revisions_per_call
            - len(keys)
        )

    def carry_identity(self, item: dict):
        """What the summary is of: the names and descriptions (a revision, or keeping the previous summary, is how
        it is written, not what of)."""
        return {k: v for k, v in item.items() if k not in ("revision", "keep")}

    async def process_batch(self, ctx: StepContext, items: list[dict], models) -> list[Rows]:
        """A partition's rows, one Rows per item in item order: revisions grouped into shared calls, the rest (and
        a revision alone in its group) one item per call."""
        cfg = ctx.settings.summarize_descriptions
        chat = models.chat(cfg.model_id)
        kept = {id(it): self._kept(it) for it in items if it.get("keep") is not None}
        items_to_write = [it for it in items if id(it) not in kept]
        groups = self._revision_groups(ctx, [it for it in items_to_write if it.get("revision") is not None], chat)
        grouped = {id(it) for group in groups for it in group}
        rows: dict[int, Rows] = dict(kept)

        async def alone(item: dict) -> None:
            rows[id(item)] = await self._one(ctx, item, chat)

        async def together(group: list[dict]) -> None:
            rows.update(await self._revise_together(ctx, group, chat))

        await asyncio.gather(
            *(alone(it) for it in items_to_write if id(it) not in grouped), *(together(g) for g in groups)
        )
        return [rows[id(it)] for it in items]

    async def process(self, ctx: StepContext, item: dict, models) -> Rows:
        if item.get("keep") is not None:
            return self._kept(item)
        return await self._one(ctx, item, models.chat(ctx.settings.summarize_descriptions.model_id))

    def _kept(self, item: dict) -> Rows:
        """The previous summary, kept with the sources it was written from (add_revisions' `keep`)."""
        self.stat_update("kept_small_change")
        keep = item["keep"]
        row = {
            "id": item["item_id"],
            "description": keep["summary"],
            "sources": keep["sources"],
            "unsaid": keep["unsaid"],
        }
        return {"summaries": [row]}

    async def _one(self, ctx: StepContext, item: dict, chat) -> Rows:
        cfg = ctx.settings.summarize_descriptions
        if item.get("revision") is not None and item["revision"]["summary"]:
            self.stat_update("revised")
            return await self._revise(ctx, item, chat)
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
                prompt = fill(
                    template,
                    entity_name=item["names"],
                    max_length=cfg.max_length,
                    description_list=json.dumps(batch, ensure_ascii=False),
                )
                answer = await chat.chat([{"role": "user", "content": prompt}], stage=STAGE)
                summary = answer.content.strip() or summary
        except LLMUnavailableError as exc:
            return self._joined(item, exc)
        return _summary_rows(item, summary or "")

    def _revision_groups(self, ctx: StepContext, revisions: list[dict], chat) -> list[list[dict]]:
        """Revisions cut, in item order, into groups of up to `revisions_per_call` whose change fits the input
        budget (counted: the byte bound, about four times a token count, would cut hub revisions three to a call);
        groups of one are left to go alone."""
        cfg = ctx.settings.summarize_descriptions
        if cfg.revisions_per_call < 2 or len(revisions) < 2:
            return []
        budget = max(200, cfg.max_input_tokens - chat.tokenizer.count_repeated(ctx.prompt(cfg.update_batch_prompt)))
        # the answer holds every item's description: a group whose answers would pass the model's max_tokens gets
        # cut, and a cut JSON answer is no answer for any of them
        answer_budget = int(ANSWER_SHARE * chat.config.max_tokens)
        longest = int(TOKENS_PER_WORD * cfg.max_length)
        groups: list[list[dict]] = [[]]
        used = answered = 0
        for item in revisions:
            size = chat.tokenizer.count(json.dumps(_revision_entry(0, item), ensure_ascii=False, indent=1))
            revision = item["revision"]
            answer = ENTRY_OVERHEAD + min(
                longest, chat.tokenizer.count(" ".join([revision["summary"], *revision["added"]]))
            )
            if groups[-1] and (
                len(groups[-1]) >= cfg.revisions_per_call or used + size > budget or answered + answer > answer_budget
            ):
                groups.append([])
                used = answered = 0
            groups[-1].append(item)
            used += size
            answered += answer
        return [g for g in groups if len(g) > 1]

    async def _revise_together(self, ctx: StepContext, group: list[dict], chat) -> dict[int, Rows]:
        """One call for a group of revisions; an item the answer leaves out (or gives empty) is revised alone."""
        cfg = ctx.settings.summarize_descriptions
        entries = [_revision_entry(n, item) for n, item in enumerate(group, 1)]
        prompt = fill(
            ctx.prompt(cfg.update_batch_prompt),
            max_length=cfg.max_length,
            items=json.dumps(entries, ensure_ascii=False, indent=1),
        )
        for item in group:
            self.stat_update("revised" if item["revision"]["summary"] else "written_in_shared_call")
        try:
            answer = await chat.chat(
                [{"role": "user", "content": prompt}],
                stage=STAGE,
                json_mode=True,
                validate=lambda content: parse_json_object(content) is not None,
            )
        except LLMUnavailableError as exc:
            return {id(item): self._joined(item, exc) for item in group}
        written = parse_json_object(answer.content) or {}
        out: dict[int, Rows] = {}
        for n, item in enumerate(group, 1):
            text = written.get(str(n))
            if isinstance(text, str) and text.strip():
                out[id(item)] = _summary_rows(item, text.strip())
            else:
                self.stat_update("alone_after_shared_call")
                if item["revision"]["summary"]:
                    out[id(item)] = await self._revise(ctx, item, chat)
                else:  # written alone from its descriptions, as in a build
                    out[id(item)] = await self._one(ctx, {k: v for k, v in item.items() if k != "revision"}, chat)
        return out

    async def _revise(self, ctx: StepContext, item: dict, chat) -> Rows:
        cfg, revision = ctx.settings.summarize_descriptions, item["revision"]
        prompt = fill(
            ctx.prompt(cfg.update_prompt),
            entity_name=item["names"],
            max_length=cfg.max_length,
            previous_summary=revision["summary"],
            added_descriptions=json.dumps(revision["added"], ensure_ascii=False),
            removed_descriptions=json.dumps(revision["removed"], ensure_ascii=False),
        )
        try:
            answer = await chat.chat([{"role": "user", "content": prompt}], stage=STAGE)
        except LLMUnavailableError as exc:
            return self._joined(item, exc)
        return _summary_rows(item, answer.content.strip() or revision["summary"])

    def _joined(self, item: dict, exc: LLMUnavailableError) -> Rows:
        """No summary could be had: the descriptions joined stand for it, and a failures row says so."""
        return {
            "failures": [self.failure_row(item, exc, "kept the descriptions joined")],
            **_summary_rows(item, "\n".join(item["descriptions"])),
        }

    def failure_source(self, item: dict) -> str:
        return item["names"]

    def update_lines(self, stats: dict) -> dict:
        return {"summaries_written": written_counts(stats)}

    def finish(self, ctx: StepContext, tables: Tables, yielded: Tables) -> Tables:
        return with_summaries(tables["resolved_entities"], tables["resolved_relationships"], yielded["summaries"])


def _write_small_ones_in_shared_calls(items: list[dict], most_tokens: int) -> None:
    """An update's item with no revision (new, grown from one description, or changed too much to revise) whose
    descriptions are short is written from them in a shared call too: an entry with no current description and
    every description new. A build writes each alone; either way the summary is of the same descriptions."""
    for item in items:
        if (
            item.get("revision") is None
            and item.get("keep") is None
            and sum(at_most_tokens(d) for d in item["descriptions"]) <= most_tokens
        ):
            item["revision"] = {"summary": "", "added": sorted(item["descriptions"]), "removed": []}


def _summary_rows(item: dict, description: str) -> Rows:
    sources = sorted(description_digest(d) for d in item["descriptions"])
    return {"summaries": [{"id": item["item_id"], "description": description, "sources": sources, "unsaid": []}]}


def _revision_entry(number: int, item: dict) -> dict:
    revision = item["revision"]
    return {
        "item": str(number),
        "entities": item["names"],
        "current_description": revision["summary"],
        "new_descriptions": revision["added"],
        "descriptions_no_longer_true": revision["removed"],
    }


STEP = SummarizeDescriptions()
