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
    # every table is scanned, not held: the id lists are worked out from narrow reads, and each output is a scan
    # with them set beside it, collected and written one at a time - at 100M tokens the documents' and text units'
    # texts alone are 0.9 GB, and all seven tables held at once took the driver from 1.4 to 2.7 GB
    lazy_reads = reads + optional_reads
    writes = ("documents", "text_units", "entities", "relationships", "communities", "community_reports", "covariates")

    def run(self, ctx: StepContext, tables: Tables) -> Tables:
        scan = {name: df.lazy() for name, df in tables.items()}  # given frames (a caller's own) are read alike
        units = scan["text_units"].drop("entity_ids", "relationship_ids", "covariate_ids", strict=False)

        def ids_per_unit(table: str, column: str) -> pl.DataFrame:
            return (
                scan[table]
                .select("id", "text_unit_ids")
                .explode("text_unit_ids")
                .group_by("text_unit_ids")
                .agg(pl.col("id").sort().alias(column))
                .rename({"text_unit_ids": "unit"})
                .collect()
            )

        claims = scan.get("covariates", empty("covariates").lazy())
        claims_per_unit = (
            claims.group_by("text_unit_id")
            .agg(pl.col("id").sort().alias("covariate_ids"))
            .rename({"text_unit_id": "unit"})
            .collect()
        )
        # the id lists in the table's row order, set beside its scan (no join of the texts: a join would copy them)
        unit_keys = units.select("id", "document_id", "human_readable_id").collect()
        unit_ids = unit_keys.select("id")
        for per_unit in (
            ids_per_unit("entities_summarized", "entity_ids"),
            ids_per_unit("relationships_summarized", "relationship_ids"),
            claims_per_unit,
        ):
            unit_ids = unit_ids.join(per_unit, left_on="id", right_on="unit", how="left", maintain_order="left")
        unit_ids = unit_ids.select(pl.col(c).fill_null([]) for c in ("entity_ids", "relationship_ids", "covariate_ids"))
        doc_units = (
            unit_keys.sort("human_readable_id")
            .group_by("document_id", maintain_order=True)
            .agg(pl.col("id").alias("text_unit_ids"))
        )
        docs = scan["documents"].drop("text_unit_ids", strict=False)
        listed = (
            docs.select("id")
            .collect()
            .join(doc_units, left_on="id", right_on="document_id", how="left", maintain_order="left")
            .select(pl.col("text_unit_ids").fill_null([]))
        )
        return {
            "documents": conform(pl.concat([docs, listed.lazy()], how="horizontal"), "documents"),
            "text_units": conform(pl.concat([units, unit_ids.lazy()], how="horizontal"), "text_units"),
            "entities": conform(scan["entities_summarized"], "entities"),
            "relationships": conform(scan["relationships_summarized"], "relationships"),
            "communities": conform(scan["communities"], "communities"),
            "community_reports": conform(scan["community_reports"], "community_reports"),
            "covariates": conform(claims, "covariates"),
        }


STEP = Finalize()
