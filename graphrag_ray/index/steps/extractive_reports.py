"""The `fast` method's community reports, with no LLM.

Title: the community's top entities by degree. Summary: the most central sentences of its text units (those
naming the most member entities, ties by the degree of the entities named). Findings: its strongest
relationships with their evidence and ids. Rank: from size and mean degree (0-10). Same table as LLM reports.

Linear in the corpus: the workers find, once per text unit, which of the unit's own entities each sentence names
(a unit names a few dozen at most); the driver then scores every community's sentences with one join per level
(a level's communities share no entity, so each level's join is as long as the mentions). Testing every member
against every sentence of every member unit instead grew with members x units - quadratic at the top levels.
"""

from __future__ import annotations

import json
import math

import polars as pl

from graphrag_ray.exec.step import ItemStep, Rows, StepContext, Tables
from graphrag_ray.ids import content_id
from graphrag_ray.index.operations.reports import render_markdown
from graphrag_ray.nlp.entities import sentences, sentences_naming
from graphrag_ray.storage.schemas import RUN_SCHEMAS

REPORT_OVERRIDES = {
    "findings": pl.List(pl.Struct({"summary": pl.String, "explanation": pl.String})),
    "children": pl.List(pl.Int64),
}


class ExtractiveReports(ItemStep):
    name = "extractive_reports"
    settings_section = "fast"
    reads = ("communities", "entities_summarized", "relationships_summarized", "text_units")
    writes = ("community_reports",)
    yields = {"sentence_mentions": RUN_SCHEMAS["sentence_mentions"]}
    carries_results = True  # an update finds the mentions of unchanged text units in the version it updates
    partition_size = 64

    def items(self, ctx: StepContext, tables: Tables, round_index: int, earlier: Tables) -> list[dict]:
        """One item per text unit naming an entity: its text and the entities it names (id, title)."""
        named = (
            tables["entities_summarized"]
            .select("id", "title", "text_unit_ids")
            .explode("text_unit_ids")
            .group_by("text_unit_ids")
            .agg(pl.struct("id", "title").sort_by("id").alias("entities"))
        )
        units = tables["text_units"].select("id", "text").join(named, left_on="id", right_on="text_unit_ids")
        return [
            {"item_id": r["id"], "text": r["text"], "entities": [(e["id"], e["title"]) for e in r["entities"]]}
            for r in units.iter_rows(named=True)
        ]

    async def process(self, ctx: StepContext, item: dict, models) -> Rows:
        spans = sentences(item["text"])
        naming = sentences_naming([sentence for _, sentence in spans], [title for _, title in item["entities"]])
        named: dict[int, list[str]] = {}
        for entity_id, title in item["entities"]:  # in id order: each sentence's ids come sorted
            for index in naming[title]:
                named.setdefault(index, []).append(entity_id)
        return {
            "sentence_mentions": [
                {
                    "unit_id": item["item_id"],
                    "sentence": index,
                    "start": spans[index][0],
                    "length": len(spans[index][1]),
                    "entity_ids": named[index],
                }
                for index in sorted(named)
            ]
        }

    def finish(self, ctx: StepContext, tables: Tables, yielded: Tables) -> Tables:
        cfg = ctx.settings.fast
        central = _central_sentences(tables, yielded["sentence_mentions"], cfg.report_sentences)
        ents = {r["id"]: r for r in tables["entities_summarized"].iter_rows(named=True)}
        rels = {r["id"]: r for r in tables["relationships_summarized"].iter_rows(named=True)}
        max_degree = max([e["degree"] for e in ents.values()] or [1]) or 1
        rows = [
            _report(c, ents, rels, central.get(c["community"], []), max_degree, cfg.report_findings)
            for c in tables["communities"].iter_rows(named=True)
        ]
        return {
            "community_reports": pl.DataFrame(rows, schema_overrides=REPORT_OVERRIDES)
            if rows
            else pl.DataFrame(schema={"id": pl.String, "community": pl.Int64, **REPORT_OVERRIDES})
        }


def _central_sentences(tables: Tables, mentions: pl.DataFrame, n: int) -> dict[int, list[str]]:
    """Each community's `n` most central sentences: naming the most of its members, then the highest summed
    degree of those named, then in corpus order; a sentence repeated by overlapping text units counts once."""
    order = tables["text_units"].select(pl.col("id").alias("unit_id"), pl.col("human_readable_id").alias("order"))
    named = mentions.explode("entity_ids").rename({"entity_ids": "entity_id"}).join(order, on="unit_id")
    degrees = tables["entities_summarized"].select(pl.col("id").alias("entity_id"), "degree")
    members = (
        tables["communities"]
        .select("community", "level", "entity_ids")
        .explode("entity_ids")
        .rename({"entity_ids": "entity_id"})
        .join(degrees, on="entity_id")
    )
    texts = tables["text_units"].select(pl.col("id").alias("unit_id"), "text")
    picked = []
    for level in members["level"].unique().sort().to_list():  # a level's communities share no entity
        scored = (
            named.join(members.filter(pl.col("level") == level), on="entity_id")
            .group_by("community", "order", "sentence")
            .agg(
                pl.len().alias("named"),
                pl.col("degree").sum().alias("weight"),
                pl.col("unit_id").first(),
                pl.col("start").first(),
                pl.col("length").first(),
            )
            .sort(["community", "named", "weight", "order", "sentence"], descending=[False, True, True, False, False])
            .group_by("community", maintain_order=True)
            .head(3 * n)
        )  # room for repeats dropped below
        picked.append(scored.select("community", "unit_id", "start", "length"))
    if not picked:
        return {}
    candidates = (
        pl.concat(picked)
        .join(texts, on="unit_id", maintain_order="left")
        .select("community", pl.col("text").str.slice(pl.col("start"), pl.col("length")).alias("text"))
    )
    out: dict[int, list[str]] = {}
    for community, text in candidates.iter_rows():
        chosen = out.setdefault(community, [])
        if len(chosen) < n and text not in chosen:
            chosen.append(text)
    return out


def _report(c: dict, ents: dict, rels: dict, central: list[str], max_degree: int, n_findings: int) -> dict:
    members = sorted((ents[e] for e in c["entity_ids"]), key=lambda e: (-e["degree"], e["title"]))
    links = sorted(  # those a sentence of the text describes: a finding quotes the data
        (rels[r] for r in c["relationship_ids"] if r in rels and (rels[r]["description"] or "").strip()),
        key=lambda r: (-r["weight"], -r["combined_degree"], r["human_readable_id"]),
    )
    title = _title([m["title"] for m in members[:3]])
    summary = " ".join(central)
    ids = ", ".join(str(m["human_readable_id"]) for m in members[:5]) + (", +more" if len(members) > 5 else "")
    summary = (summary or members[0]["description"] if members else summary) + f" [Data: Entities ({ids})]"
    findings = [
        {
            "summary": f"{r['source']} — {r['target']}",
            "explanation": f"{r['description']} [Data: Relationships ({r['human_readable_id']})]",
        }
        for r in links[:n_findings]
    ]
    if not findings:
        findings = [
            {"summary": m["title"], "explanation": f"{m['description']} [Data: Entities ({m['human_readable_id']})]"}
            for m in members[:n_findings]
        ]
    mean_degree = sum(m["degree"] for m in members) / max(1, len(members))
    rank = round(min(10.0, 2.0 * math.log2(1 + len(members)) + 4.0 * mean_degree / max_degree), 2)
    report = {
        "title": title,
        "summary": summary,
        "findings": findings,
        "rating": rank,
        "rating_explanation": f"{len(members)} entities, mean degree {mean_degree:.1f} (extractive)",
    }
    return {
        "id": content_id("community_report", c["id"]),
        "human_readable_id": c["community"],
        "community": c["community"],
        "level": c["level"],
        "parent": c["parent"],
        "children": c["children"],
        "title": title,
        "summary": summary,
        "full_content": render_markdown(report),
        "rank": rank,
        "rating_explanation": report["rating_explanation"],
        "findings": findings,
        "full_content_json": json.dumps(report, ensure_ascii=False),
        "period": c["period"],
        "size": c["size"],
    }


def _title(names: list[str]) -> str:
    if not names:
        return "Community"
    if any(not n.isascii() for n in names):
        return "、".join(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


STEP = ExtractiveReports()
