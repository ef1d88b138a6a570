"""Assemble the published tables: cross-references (documents -> text units -> entities/relationships),
final column sets and types (storage/schemas.py), in a deterministic order."""

from __future__ import annotations

import polars as pl

from graphrag_ray.exec.step import BatchStep, StepContext, Tables
from graphrag_ray.storage.schemas import conform, empty


class Finalize(BatchStep):
    name = "finalize"
    reads = (
        "documents",
        "text_units",
        "entities_summarized",
        "relationships_summarized",
        "communities",
        "community_reports",
    )
    optional_reads = ("covariates",)
    writes = ("documents", "text_units", "entities", "relationships", "communities", "community_reports", "covariates")

    def run(self, ctx: StepContext, tables: Tables) -> Tables:
        units = tables["text_units"].drop("entity_ids", "relationship_ids", "covariate_ids", strict=False)
        ents = tables["entities_summarized"]
        rels = tables["relationships_summarized"]

        def ids_per_unit(df: pl.DataFrame, column: str) -> pl.DataFrame:
            return (
                df.select("id", "text_unit_ids")
                .explode("text_unit_ids")
                .group_by("text_unit_ids")
                .agg(pl.col("id").sort().alias(column))
                .rename({"text_unit_ids": "unit"})
            )

        claims = tables.get("covariates", empty("covariates"))
        claims_per_unit = (
            claims.group_by("text_unit_id")
            .agg(pl.col("id").sort().alias("covariate_ids"))
            .rename({"text_unit_id": "unit"})
        )
        # the id lists are joined to a frame of ids alone, in the table's row order, then set beside the texts: a
        # join of the whole table would copy every text unit's and document's text (0.8 GB at 100M tokens)
        unit_ids = (
            units.select("id")
            .join(ids_per_unit(ents, "entity_ids"), left_on="id", right_on="unit", how="left", maintain_order="left")
            .join(
                ids_per_unit(rels, "relationship_ids"), left_on="id", right_on="unit", how="left", maintain_order="left"
            )
            .join(claims_per_unit, left_on="id", right_on="unit", how="left", maintain_order="left")
        )
        units = units.with_columns(
            unit_ids["entity_ids"].fill_null([]),
            unit_ids["relationship_ids"].fill_null([]),
            unit_ids["covariate_ids"].fill_null([]),
        )
        doc_units = (
            units.select("id", "document_id", "human_readable_id")
            .sort("human_readable_id")
            .group_by("document_id", maintain_order=True)
            .agg(pl.col("id").alias("unit_ids"))
        )
        docs = tables["documents"]
        listed = docs.select("id").join(
            doc_units, left_on="id", right_on="document_id", how="left", maintain_order="left"
        )
        docs = docs.with_columns(listed["unit_ids"].fill_null([]).alias("text_unit_ids"))
        return {
            "documents": conform(docs, "documents"),
            "text_units": conform(units, "text_units"),
            "entities": conform(ents, "entities"),
            "relationships": conform(rels, "relationships"),
            "communities": conform(tables["communities"], "communities"),
            "community_reports": conform(tables["community_reports"], "community_reports"),
            "covariates": conform(claims, "covariates"),
        }


STEP = Finalize()
