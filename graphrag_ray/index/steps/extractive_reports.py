"""The `fast` method's community reports, with no LLM.

Title: the community's top entities by degree. Summary: the most central sentences of its text units (those
naming the most member entities, ties by the degree of the entities named). Findings: its strongest
relationships with their evidence and ids. Rank: from size and mean degree (0-10). Same table as LLM reports.
"""

from __future__ import annotations

import json
import math

import polars as pl

from graphrag_ray.ids import content_id
from graphrag_ray.exec.step import BatchStep, StepContext, Tables
from graphrag_ray.index.steps.community_reports import render_markdown
from graphrag_ray.nlp.entities import sentences


class ExtractiveReports(BatchStep):
    name = "extractive_reports"
    reads = ("communities", "entities_summarized", "relationships_summarized", "text_units")
    writes = ("community_reports",)

    def run(self, ctx: StepContext, tables: Tables) -> Tables:
        cfg = ctx.settings.fast
        ents = {r["id"]: r for r in tables["entities_summarized"].iter_rows(named=True)}
        rels = {r["id"]: r for r in tables["relationships_summarized"].iter_rows(named=True)}
        units = dict(zip(tables["text_units"]["id"].to_list(), tables["text_units"]["text"].to_list()))
        max_degree = max([e["degree"] for e in ents.values()] or [1]) or 1
        rows = []
        for c in tables["communities"].iter_rows(named=True):
            members = sorted((ents[e] for e in c["entity_ids"]), key=lambda e: (-e["degree"], e["title"]))
            links = sorted((rels[r] for r in c["relationship_ids"] if r in rels),
                           key=lambda r: (-r["weight"], -r["combined_degree"], r["human_readable_id"]))
            title = _title([m["title"] for m in members[:3]])
            summary = " ".join(self._central(members, c["text_unit_ids"], units, cfg.report_sentences))
            ids = ", ".join(str(m["human_readable_id"]) for m in members[:5]) + (", +more" if len(members) > 5 else "")
            summary = (summary or members[0]["description"] if members else summary) + f" [Data: Entities ({ids})]"
            findings = [{"summary": f"{r['source']} — {r['target']}",
                         "explanation": f"{r['description']} [Data: Relationships ({r['human_readable_id']})]"}
                        for r in links[: cfg.report_findings]]
            if not findings:
                findings = [{"summary": m["title"], "explanation": f"{m['description']} [Data: Entities "
                                                                   f"({m['human_readable_id']})]"}
                            for m in members[: cfg.report_findings]]
            mean_degree = sum(m["degree"] for m in members) / max(1, len(members))
            rank = round(min(10.0, 2.0 * math.log2(1 + len(members)) + 4.0 * mean_degree / max_degree), 2)
            report = {"title": title, "summary": summary, "findings": findings, "rating": rank,
                      "rating_explanation": f"{len(members)} entities, mean degree {mean_degree:.1f} (extractive)"}
            rows.append({"id": content_id("community_report", c["id"]), "human_readable_id": c["community"],
                         "community": c["community"], "level": c["level"], "parent": c["parent"],
                         "children": c["children"], "title": title, "summary": summary,
                         "full_content": render_markdown(report), "rank": rank,
                         "rating_explanation": report["rating_explanation"], "findings": findings,
                         "full_content_json": json.dumps(report, ensure_ascii=False), "period": c["period"],
                         "size": c["size"]})
        schema = {"findings": pl.List(pl.Struct({"summary": pl.String, "explanation": pl.String})),
                  "children": pl.List(pl.Int64)}
        return {"community_reports": pl.DataFrame(rows, schema_overrides=schema) if rows
                else pl.DataFrame(schema={"id": pl.String, "community": pl.Int64, **schema})}

    @staticmethod
    def _central(members: list[dict], unit_ids: list[str], units: dict, n: int) -> list[str]:
        weight = {m["title"]: m["degree"] for m in members}
        scored = []
        for order, unit_id in enumerate(unit_ids):
            for _, sentence in sentences(units.get(unit_id, "")):
                upper = sentence.upper()
                named = [t for t in weight if (t in sentence if not t.isascii() else t in upper)]
                if named:
                    scored.append((-len(named), -sum(weight[t] for t in named), order, sentence))
        scored.sort()
        out = []
        for *_, sentence in scored:
            if sentence not in out:
                out.append(sentence)
            if len(out) == n:
                break
        return out


def _title(names: list[str]) -> str:
    if not names:
        return "Community"
    if any(not n.isascii() for n in names):
        return "、".join(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


STEP = ExtractiveReports()
