"""What changed between the version an update started from and the one it publishes (`changes.json`).

Rows are matched by id (ids are content hashes, so for most tables an id that exists in both is the same row). A
document is matched by where it comes from - its input id, or its file and row - so an edited document is
"changed", not one removed and one added. Entities and relationships keep their ids (their names) while their
descriptions, links or degrees change. Communities and their reports are matched by number: a community that
gained or lost a few members keeps its number (carry.py) and is "changed", though its id (a hash of its members)
is new."""

from __future__ import annotations

import polars as pl

from graphrag_ray.ids import document_source
from graphrag_ray.llm.ledger import UsageLedger
from graphrag_ray.storage.location import Store
from graphrag_ray.storage.tables import read_table

# each table's key, and the columns whose change makes a row "changed" (ids and human-readable numbers aside)
COMPARED = {
    "text_units": ("id", ("text",)),
    "entities": ("id", ("title", "type", "description", "text_unit_ids", "degree")),
    "relationships": ("id", ("source", "target", "description", "weight", "text_unit_ids")),
    "communities": ("community", ("level", "parent", "entity_ids", "relationship_ids")),
    "community_reports": ("community", ("full_content",)),
}


def _diff(old: pl.DataFrame | None, new: pl.DataFrame, key: str, compared: tuple[str, ...]) -> dict[str, list]:
    """Keys added, changed (a compared column differs: the rows' hashes) and removed - in polars, not row by row
    (at 1M tokens, Python dicts of every row of six tables took a quarter of a second of an update)."""
    old = old if old is not None else new.clear()

    def hashed(df: pl.DataFrame) -> pl.DataFrame:
        return df.select(pl.col(key), pl.struct(list(compared)).hash(seed=0).alias("row"))

    both = hashed(new).join(hashed(old), on=key, how="full", coalesce=True, suffix="_old")
    return {
        "added": sorted(both.filter(pl.col("row_old").is_null())[key].to_list()),
        "changed": sorted(
            both.filter(
                pl.col("row").is_not_null() & pl.col("row_old").is_not_null() & (pl.col("row") != pl.col("row_old"))
            )[key].to_list()
        ),
        "removed": sorted(both.filter(pl.col("row").is_null())[key].to_list()),
    }


def describe_changes(previous: Store, tables: dict[str, pl.DataFrame], ledger: UsageLedger) -> dict:
    def with_source(df: pl.DataFrame | None) -> pl.DataFrame | None:
        if df is None:
            return None
        return df.with_columns(pl.col("raw_data").map_elements(document_source, return_dtype=pl.String).alias("source"))

    result = {
        "from_version": previous.location.rsplit("/", 1)[-1],
        "tables": {
            "documents": _diff(
                with_source(read_table(previous, "documents")), with_source(tables["documents"]), "source", ("id",)
            )
        },
    }
    for name, (key, compared) in COMPARED.items():
        result["tables"][name] = _diff(read_table(previous, name), tables[name], key, compared)
    total = ledger.total()
    result["spent"] = {
        "calls": total.calls,
        "prompt_tokens": total.prompt_tokens,
        "completion_tokens": total.completion_tokens,
        "cache_hits": total.cache_hits,
        "cost": round(total.cost, 6),
    }
    result["spent_by_stage"] = {
        stage: calls for stage, calls in sorted({s: ledger.total(s).calls for s, _ in ledger.entries}.items())
    }
    return result
