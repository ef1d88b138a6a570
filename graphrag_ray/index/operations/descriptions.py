"""Entities' and relationships' descriptions made one: a summary where there is one, else the descriptions joined
(the LLM's summaries and the fast method's joined sentences end the same way); and what an update needs to revise
a summary from the previous one instead of writing it again from every description."""

from __future__ import annotations

import hashlib

import polars as pl

from graphrag_ray.exec.carried import KEY_COLUMN
from graphrag_ray.ids import content_id, normalize_name
from graphrag_ray.storage.tables import read_table

# a summary, the digests of the descriptions it was written from (what an update compares), and of those the item
# gained since, which a kept summary does not say yet (keep_max_added_share; empty for a summary written now)
SUMMARY_ROWS = {"id": pl.String, "description": pl.String, "sources": pl.List(pl.String), "unsaid": pl.List(pl.String)}


def with_summaries(
    entities: pl.DataFrame, relationships: pl.DataFrame, summaries: pl.DataFrame | None = None
) -> dict[str, pl.DataFrame]:
    """`entities_summarized` and `relationships_summarized`: each row's `description` is its summary (by id) or,
    with none, its `descriptions` joined by newlines."""
    summaries = pl.DataFrame(schema=SUMMARY_ROWS) if summaries is None else summaries

    def resolve(df: pl.DataFrame) -> pl.DataFrame:
        single = pl.col("descriptions").list.join("\n")
        return (
            df.join(summaries.select("id", pl.col("description").alias("summary")), on="id", how="left")
            .with_columns(pl.coalesce("summary", single).alias("description"))
            .drop("summary")
        )

    return {"entities_summarized": resolve(entities), "relationships_summarized": resolve(relationships)}


# an update revises a summary from its previous one when the item has at least this many descriptions, at most a
# quarter of them changed, and the previous summary with the change is shorter than all the descriptions: short of
# that, summarising afresh costs about what revising does. When revisions share calls (`revisions_per_call`), a
# revision no longer costs a call of its own but a share of one, so any summarised item (two descriptions, one
# changed) is worth revising whose summary and change are shorter than its descriptions and the fresh call's
# prompt less that share
REVISE_MIN_DESCRIPTIONS = 8
REVISE_MIN_DESCRIPTIONS_BATCHED = 2
REVISE_MAX_CHANGED_SHARE = 0.25


def description_digest(text: str) -> str:
    """What a summary remembers of each description it was written from (a summary's `sources`)."""
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def add_revisions(ctx, items: list[dict], text_units: pl.DataFrame, shared_call_saving: int | None = None) -> int:
    """An update: give each item whose description set changed a little a `revision` - its previous summary, the
    descriptions added, and the removed ones' text (from the previous version's extraction of the text units no
    longer there) - so it is summarised with one call from those, not from every description again. An item that
    only gained a few (`keep_max_added_share`: a hub named in a new document) or is back to what its summary was
    written from gets `keep` instead: its previous summary, with no call. An item
    whose removed descriptions cannot all be named (merged under another name, say) is summarised afresh.
    With `shared_call_saving` (revisions share calls: the bytes of prompt a revision saves over a fresh call of
    its own) an item of fewer descriptions qualifies, at least one change is always allowed, and the saving counts
    on the fresh side. Returns how many items got one."""
    batched = shared_call_saving is not None
    keep_share = ctx.settings.summarize_descriptions.keep_max_added_share
    previous = ctx.previous
    summaries = ctx.previous_carried("summarize_descriptions", "summaries")
    if summaries is None or "sources" not in summaries.columns:
        return 0
    least = REVISE_MIN_DESCRIPTIONS_BATCHED if batched else REVISE_MIN_DESCRIPTIONS
    wanted = {item["item_id"] for item in items if len(item["descriptions"]) >= min(least, 2)}
    before = {
        r["id"]: (r["description"], set(r["sources"] or ()))
        for r in summaries.filter(pl.col("id").is_in(list(wanted))).iter_rows(named=True)
    }
    # a summary that failed (its descriptions joined stand for it) is asked for again, never kept
    done = ctx.previous_carried("summarize_descriptions", "items")
    keepable = (
        set(summaries.filter(pl.col(KEY_COLUMN).is_in(done["key"].implode()))["id"].to_list())
        if done is not None and KEY_COLUMN in summaries.columns
        else set()
    )
    if not before:
        return 0
    gone = _removed_descriptions(previous, text_units)
    revised = 0
    for item in items:
        if item["item_id"] not in before:
            continue
        summary, sources = before[item["item_id"]]
        digests = {description_digest(d): d for d in item["descriptions"]}
        added = sorted(d for key, d in digests.items() if key not in sources)
        removed_keys = sources - digests.keys()
        removed = sorted({t for t in gone.get(item["item_id"], ()) if description_digest(t) in removed_keys})
        changed = len(added) + len(removed_keys)
        if item["item_id"] in keepable and not removed_keys and len(added) <= keep_share * len(item["descriptions"]):
            # written from these descriptions (a revert), or from all but a few added ones: the summary stays, and
            # its sources still name what it was written from, so the next revision is told the unsaid ones too
            item["keep"] = {
                "summary": summary,
                "sources": sorted(sources),
                "unsaid": sorted(description_digest(d) for d in added),
            }
            continue
        most = REVISE_MAX_CHANGED_SHARE * len(item["descriptions"])
        if len(item["descriptions"]) < least:
            continue
        if len(removed) != len(removed_keys) or changed > (max(1.0, most) if batched else most):
            continue
        # compared in UTF-8 bytes: a revision sends the summary and the change, a fresh summary every description
        revision_bytes = len(summary.encode()) + sum(len(d.encode()) for d in added + removed)
        if revision_bytes >= sum(len(d.encode()) for d in item["descriptions"]) + (shared_call_saving or 0):
            continue
        item["revision"] = {"summary": summary, "added": added, "removed": removed}
        revised += 1
    return revised


def _removed_descriptions(previous, text_units: pl.DataFrame) -> dict[str, set[str]]:
    """entity id -> the descriptions the previous version's extraction gave it in text units this run no longer
    has (only those rows are read: the removed units are few)."""
    units = read_table(previous, "text_units")
    if units is None:
        return {}
    removed = set(units["id"].to_list()) - set(text_units["id"].to_list())
    extracted = read_table(previous.child("carried/extract_graph"), "extracted_entities") if removed else None
    if extracted is None:
        return {}
    out: dict[str, set[str]] = {}
    for title, description in (
        extracted.filter(pl.col("text_unit_id").is_in(list(removed))).select("title", "description").iter_rows()
    ):
        key = normalize_name(title)
        if key and description:
            out.setdefault(content_id("entity", key), set()).add(description)
    return out
