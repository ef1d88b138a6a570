"""Community reports, bottom-up where it matters: a community's report needs its sub-communities' reports only when
its own rows do not fit the input budget, so every community whose rows surely fit (and every revision) is written
in the first round, whatever its level, and only the others wait, one level per round, deepest first.

A community's context is its entities, relationships (and claims) as CSV tables. When that exceeds the input
budget and the community has sub-communities with reports, the largest sub-communities' reports (their full
content, as Microsoft GraphRAG's build_mixed_context) replace their members, one by one, until the context fits
(the GraphRAG paper's algorithm); when even that does not fit, the sub-reports that fit come first and the
highest-degree remaining members fill what is left - never an empty context while a sub-report fits. With no
sub-reports, the lowest-degree rows are left out. The answer is structured JSON (title, summary, findings, rating,
rating_explanation), rendered to markdown `full_content`.

In an update, a community whose members, their descriptions and its sub-communities are unchanged keeps its report
(carried, no call). A changed one that had a report is revised when that is the smaller prompt
(`revise_on_update`): the previous report and only the rows added, changed or removed since, so the cost follows
the change, not the community's size (a 200-member root community changed by three entities costs a few hundred
tokens, not its 8,000-token context). When most of a community changed, or the changes alone do not fit the input
budget, it is written afresh. A community of which only a few rows were added, removed or had their description
changed (an entity mentioned once more in a document elsewhere, or one that joined or left: around a hub, most
changed communities are such) keeps its report until those rows, counted since the report was written, are
`revise_min_changed_share` of its rows; the kept report remembers them (`changed_rows`, `removed_rows`, in the
carried rows), so small changes add up to a revision that is told all of them, and changes.json counts the reports
kept so.
"""

from __future__ import annotations

import json

import polars as pl

from graphrag_ray.config.prompts import fill
from graphrag_ray.exec.step import ItemPlan, ItemStep, Rows, StepContext, Tables, written_counts
from graphrag_ray.ids import content_id
from graphrag_ray.index.operations.report_context import (
    PreviousReports,
    changes_context,
    csv_table,
    descendants,
    fits_by,
    local_context,
    rows_fit,
)
from graphrag_ray.index.operations.reports import render_markdown, rows_report, valid_report
from graphrag_ray.llm.tokens import fits, tokenizer_for
from graphrag_ray.parsing.llm_output import parse_json_object

STAGE = "community_reports"
REPORT_SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "summary": {"type": "string"},
        "rating": {"type": "number"},
        "rating_explanation": {"type": "string"},
        "findings": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"summary": {"type": "string"}, "explanation": {"type": "string"}},
                "required": ["summary", "explanation"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["title", "summary", "rating", "rating_explanation", "findings"],
    "additionalProperties": False,
}
RESPONSE_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "community_report", "schema": REPORT_SCHEMA, "strict": True},
}
REPORT_ROW_SCHEMA = {
    "id": pl.String,
    "community": pl.Int64,
    "title": pl.String,
    "summary": pl.String,
    "full_content": pl.String,
    "rank": pl.Float64,
    "rating_explanation": pl.String,
    "findings_json": pl.String,
    "full_content_json": pl.String,
    # its rows added or whose descriptions changed since it was written (kept, not revised: see above)
    "changed_rows": pl.List(pl.String),
    # and the rows that left since (JSON: ["entity", id, human id, title] / ["relationship", id, human id, source,
    # target]), told to the revision that follows
    "removed_rows": pl.List(pl.String),
}


class ReportPlan(ItemPlan):
    """The reports' driver side for one run: the communities' items, made once (round 0 keeps those that wait
    for sub-reports), and in an update the version the revisions start from, read once."""

    def __init__(self, step: ItemStep):
        super().__init__(step)
        self.previous: PreviousReports | None = None
        self.waiting: tuple | None = None  # communities by number, the first round's items, the others' by level

    def rounds(self, ctx: StepContext, tables: Tables) -> int:
        """The first round: every community whose report needs no sub-report; then one per level, deepest first,
        for those that do."""
        levels = tables["communities"]["level"]
        return int(levels.max()) + 2 if levels.len() else 0

    def items(self, ctx: StepContext, tables: Tables, round_index: int, earlier: Tables) -> list[dict]:
        """Round 0: every community whose report needs no sub-report, of every level; round r: the others of level
        (deepest - r + 1), with their sub-communities' reports. Each community's item is made once per run: round 0
        keeps those that wait (references to the rows, no copies)."""
        communities = tables["communities"]
        deepest = int(communities["level"].max())
        if round_index == 0 or self.waiting is None:
            self.waiting = self.first_round(ctx, tables)
        by_number, first, waiting = self.waiting
        if round_index == 0:
            items = first
            self.waiting = (by_number, [], waiting)  # sent: the plan holds only the waiting ones
        else:
            sub_reports = (
                {r["community"]: r for r in earlier["reports"].iter_rows(named=True)} if "reports" in earlier else {}
            )
            items = waiting.pop(deepest - round_index + 1, [])
            for item in items:
                row = by_number[item["community"]]
                for child in sorted(row["children"], key=lambda c: -by_number[c]["size"]):
                    if child in sub_reports:
                        item["children"].append(
                            {
                                "entity_ids": by_number[child]["entity_ids"],
                                "size": by_number[child]["size"],
                                "report": sub_reports[child],
                            }
                        )
        if round_index == deepest + 1:  # the last round: hold nothing of this run (or of the previous version)
            self.previous = self.waiting = None
        return items

    def first_round(self, ctx: StepContext, tables: Tables) -> tuple[dict, list[dict], dict[int, list[dict]]]:
        """(communities by number, the first round's items, the others' items by level)."""
        communities = tables["communities"]
        # every row once as a dict, its strings shared: a community's id lists hold the rows' own id strings and a
        # relationship's ends its entities' titles (copies of each id per level were 155 MB of a 100M run's driver)
        ent_by_id = {r["id"]: r for r in tables["entities_summarized"].iter_rows(named=True)}
        title = {r["title"]: r["title"] for r in ent_by_id.values()}
        rel_by_id = {}
        for r in tables["relationships_summarized"].iter_rows(named=True):
            r["source"], r["target"] = title.get(r["source"], r["source"]), title.get(r["target"], r["target"])
            rel_by_id[r["id"]] = r
        by_number = {}
        for r in communities.iter_rows(named=True):
            r["entity_ids"] = [ent_by_id[e]["id"] for e in r["entity_ids"]]
            r["relationship_ids"] = [rel_by_id[e]["id"] for e in r["relationship_ids"]]
            by_number[r["community"]] = r
        del title
        previous = self.previous_reports(ctx)
        cfg = ctx.settings.community_reports
        budget = cfg.max_input_length
        count = None
        if previous is not None:  # an update writes few reports: counting their tokens moves more to round 0
            model = ctx.settings.model(cfg.model_id)
            count = tokenizer_for(model.model, model.encoding).count
        first, waiting = [], {}
        for row in sorted(by_number.values(), key=lambda r: r["community"]):
            item = {
                "item_id": row["id"],
                "community": row["community"],
                "entities": sorted(
                    (ent_by_id[e] for e in row["entity_ids"]), key=lambda e: (-e["degree"], e["human_readable_id"])
                ),
                "relationships": sorted(
                    (rel_by_id[r] for r in row["relationship_ids"]),
                    key=lambda r: (-r["combined_degree"], r["human_readable_id"]),
                ),
                "descendants": descendants(row, by_number),
                "children": [],
            }
            revision = previous.revision(item, row["level"]) if previous is not None else None
            if revision is not None and "keep" in revision:  # a few descriptions changed: the report stays
                item["_keep"] = revision["keep"]
                first.append(item)
                continue
            if revision is not None:  # a hint, not part of what the item is (carry_identity leaves it out)
                item["_revision"] = revision
            # an unchanged community is carried whichever round it is in: its tokens are not worth counting
            changed = previous is not None and (revision is not None or row["community"] not in previous.communities)
            counted = count if changed else None
            # whether the rows surely fit - by their tokens for a changed community of an update, else by the
            # bytes bound - where the round needs it or the tokens are counted: a hint the worker trusts when true
            # (it does not count them again); a leaf of a full build is left to the worker's own bytes bound
            item["_rows_fit"] = (bool(row["children"]) or changed) and rows_fit(
                item["entities"], item["relationships"], budget, counted
            )
            item["_first_round"] = (
                not row["children"]
                or item["_rows_fit"]
                or (revision is not None and fits_by(changes_context(revision), budget, counted))
            )
            if item["_first_round"]:
                first.append(item)
            else:
                waiting.setdefault(row["level"], []).append(item)
        return by_number, first, waiting

    def prepare(self, ctx: StepContext) -> None:
        """An update reads the version it revises from, and builds the tokenizer that counts the changed
        communities' tokens, while the summaries are being written."""
        if self.previous_reports(ctx) is not None:
            model = ctx.settings.model(ctx.settings.community_reports.model_id)
            tokenizer_for(model.model, model.encoding)

    def previous_reports(self, ctx: StepContext) -> PreviousReports | None:
        """The version an update revises from, read once per run."""
        if ctx.previous is None or not ctx.settings.community_reports.revise_on_update:
            return None
        if self.previous is None:
            self.previous = PreviousReports(ctx)
        return self.previous

    def finish(self, ctx: StepContext, tables: Tables, yielded: Tables) -> Tables:
        reports = yielded["reports"]
        finding_type = pl.List(pl.Struct({"summary": pl.String, "explanation": pl.String}))
        reports = reports.with_columns(pl.col("findings_json").str.json_decode(finding_type).alias("findings"))
        meta = tables["communities"].select("community", "level", "parent", "children", "period", "size")
        reports = reports.join(meta, on="community", how="left").with_columns(
            pl.col("community").alias("human_readable_id")
        )
        # by number: the same table whichever round wrote a report (an update revises in the first round)
        return {"community_reports": reports.drop("findings_json", "changed_rows", "removed_rows").sort("community")}


class CommunityReports(ItemStep):
    name = "community_reports"
    uses_llm, settings_section = True, "community_reports"
    prompt_keys, update_prompt_keys = ("prompt",), ("update_prompt",)
    update_keys = ("revise_on_update",)
    reads = ("communities", "entities_summarized", "relationships_summarized")
    read_columns = {  # what a context and the reports' table are made of (a large run holds only these)
        "communities": (
            "id",
            "community",
            "level",
            "parent",
            "children",
            "entity_ids",
            "relationship_ids",
            "period",
            "size",
        ),
        "entities_summarized": ("id", "human_readable_id", "title", "description", "degree"),
        "relationships_summarized": ("id", "human_readable_id", "source", "target", "description", "combined_degree"),
    }
    writes = ("community_reports",)
    yields = {"reports": REPORT_ROW_SCHEMA}
    carries_results = True  # an update takes unchanged items' rows from the version it updates
    Plan = ReportPlan

    def estimate(self, corpus) -> list:
        """Projected: a report per community (a share of the entities) but the small ones written from their rows,
        each with the template and a context of its members' rows."""
        from graphrag_ray.index.estimate import (
            ENTITIES_PER_COMMUNITY,
            ENTITY_ROW_TOKENS,
            RELATIONSHIP_ROW_TOKENS,
            REPORT_OUTPUT,
            SMALL_COMMUNITY_SHARE,
        )
        from graphrag_ray.llm.tokens import tokenizer_for

        cfg = corpus.settings.community_reports
        chat = corpus.settings.model(cfg.model_id)
        tok = tokenizer_for(chat.model, chat.encoding)
        reported = corpus.communities * (1 - SMALL_COMMUNITY_SHARE if cfg.min_llm_entities >= 3 else 1)
        per_entity = corpus.names.relationships / max(1, corpus.names.entities)
        context = min(
            cfg.max_input_length, ENTITIES_PER_COMMUNITY * (ENTITY_ROW_TOKENS + per_entity * RELATIONSHIP_ROW_TOKENS)
        )
        template = tok.count(corpus.ctx.prompt(cfg.prompt))
        return [
            corpus.stage(
                self.name, cfg.model_id, reported, reported * (template + context), reported * REPORT_OUTPUT, False
            )
        ]

    def failure_source(self, item: dict) -> str:
        return f"community {item['community']}"

    def update_lines(self, stats: dict) -> dict:
        """Revised reports are not what a full index would write: an update says how many it revised."""
        return {"reports_written": written_counts(stats)}

    def carry_identity(self, item: dict):
        """A community whose members and member descriptions are unchanged keeps its report. Degrees (and
        with them the order of rows) move when a member gains an edge outside the community; that is not what the
        report is about, so it is not a reason for a new call. Ids stay: reports cite them. Its sub-communities'
        reports are what they are because of their members, which are its own, and their own sub-communities: the
        members of every community below it stand for them (an item written in the first round has none yet)."""
        return (
            item["item_id"],
            item["community"],
            sorted((e["id"], e["human_readable_id"], e["title"], e["description"]) for e in item["entities"]),
            sorted(
                (r["id"], r["human_readable_id"], r["source"], r["target"], r["description"])
                for r in item["relationships"]
            ),
            item.get("descendants", ""),
        )

    def context(self, item: dict, budget: int, count) -> str:
        local = local_context

        def reports(children) -> str:
            return csv_table(
                "Reports",
                ["id", "title", "content"],
                [[c["report"]["community"], c["report"]["title"], c["report"]["full_content"]] for c in children],
            )

        def uncovered(children):
            covered = {e for child in children for e in child["entity_ids"]}
            rest = [e for e in item["entities"] if e["id"] not in covered]
            titles = {e["title"] for e in rest}
            return rest, [r for r in item["relationships"] if r["source"] in titles or r["target"] in titles]

        def top_rows(entities, relationships, room: int) -> str:
            """The highest-degree rows that fit in `room` ("" when not even one does)."""
            entities, relationships = list(entities), list(relationships)
            while (entities or relationships) and not fits(local(entities, relationships), room, count):
                if len(relationships) >= len(entities) and relationships:
                    relationships = relationships[: max(0, int(len(relationships) * 0.8))]
                else:
                    entities = entities[: max(0, int(len(entities) * 0.8))]
            return local(entities, relationships) if entities or relationships else ""

        full = local(item["entities"], item["relationships"])
        if item.get("_rows_fit") or fits(full, budget, count):  # most communities: their members' rows fit
            return full
        children = item["children"]
        for k in range(1, len(children) + 1):  # the largest sub-communities' reports replace their members
            candidate = reports(children[:k]) + "\n" + local(*uncovered(children[:k]))
            if fits(candidate, budget, count):
                return candidate
        # even every sub-report with the remaining members is too large: the sub-reports that fit (largest
        # first), then the highest-degree remaining members in what is left
        packed: list[dict] = []
        for child in children:
            if fits(reports(packed + [child]), budget, count):
                packed.append(child)
        if packed:
            text = reports(packed)
            rest = top_rows(*uncovered(packed), budget - count(text) - 1)
            return text + ("\n" + rest if rest else "")
        # over the budget however cut: the top row alone (the budget is a target for the model's input)
        return top_rows(item["entities"], item["relationships"], budget) or local(item["entities"][:1], [])

    async def process(self, ctx: StepContext, item: dict, models) -> Rows:
        if item.get("_keep") is not None:
            self.stat_update("kept_small_change")
            return {"reports": [item["_keep"]]}
        cfg = ctx.settings.community_reports
        if len(item["entities"]) < cfg.min_llm_entities and not item["descendants"]:
            self.stat_update("written_from_rows")
            return self._reports(item, rows_report(item["entities"], item["relationships"]))
        chat = models.chat(cfg.model_id)
        template = ctx.prompt(cfg.prompt)
        budget = cfg.max_input_length
        revision = item.get("_revision") if cfg.revise_on_update else None
        revised = None
        if revision is not None:
            changes = changes_context(revision)
            if fits(changes, budget, chat.tokenizer.count):
                revised = fill(
                    ctx.prompt(cfg.update_prompt),
                    previous_report=revision["report"],
                    input_text=changes,
                    max_report_length=cfg.max_length,
                )
        if (
            revised is not None
            and item.get("_first_round")
            and item.get("descendants")
            and not (
                item.get("_rows_fit")
                or fits(local_context(item["entities"], item["relationships"]), budget, chat.tokenizer.count)
            )
        ):
            prompt = revised  # written afresh, it would need the sub-reports it did not wait for
        else:
            text = self.context(item, budget, chat.tokenizer.count)
            prompt = fill(template, input_text=text, max_report_length=cfg.max_length)
            # compared in UTF-8 bytes (the same data on both sides): counting an 8,000-token context's tokens
            # once more would cost more CPU than the choice
            if revised is not None and len(revised.encode()) < len(prompt.encode()):
                prompt = revised
        if prompt is revised:
            self.stat_update("revised")
        answer = await chat.chat(
            [{"role": "user", "content": prompt}],
            stage=STAGE,
            response_format=RESPONSE_FORMAT,
            validate=lambda content: valid_report(parse_json_object(content)),
        )
        report = parse_json_object(answer.content) or {}
        findings = [
            f if isinstance(f, dict) else {"summary": str(f), "explanation": ""} for f in report.get("findings") or []
        ]
        try:
            rating = float(report.get("rating", 0.0))
        except (TypeError, ValueError):
            rating = 0.0
        return self._reports(item, {**report, "findings": findings, "rating": rating})

    @staticmethod
    def _reports(item: dict, report: dict) -> Rows:
        findings = report["findings"]
        return {
            "reports": [
                {
                    "id": content_id("community_report", item["item_id"]),
                    "community": item["community"],
                    "title": report["title"],
                    "summary": report["summary"],
                    "full_content": render_markdown(report),
                    "rank": report["rating"],
                    "rating_explanation": str(report.get("rating_explanation", "")),
                    "findings_json": json.dumps(findings, ensure_ascii=False),
                    "full_content_json": json.dumps(report, ensure_ascii=False),
                    "changed_rows": [],
                    "removed_rows": [],
                }
            ]
        }


STEP = CommunityReports()
