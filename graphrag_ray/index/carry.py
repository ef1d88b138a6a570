"""What an update carries over from the previous version: the numbers people and prompts see.

A row that exists in the previous version (same id - ids are content hashes) keeps its human-readable number; new
rows are numbered after the previous ones, in the order given. With no previous version this is plain numbering
0, 1, 2, ... in that order - a full build is unchanged. Stable numbers keep the prompts of untouched communities
identical, so their reports are cache hits."""

from __future__ import annotations

import polars as pl


def carried_numbers(ids: list[str], previous: pl.DataFrame | None, column: str = "human_readable_id") -> list[int]:
    """The number of each id, in `ids` order: the previous one where the id existed, else the next free one."""
    if previous is None or not previous.height:
        return list(range(len(ids)))
    known = dict(zip(previous["id"].to_list(), previous[column].to_list()))
    following = max(known.values(), default=-1) + 1
    numbers = []
    for row_id in ids:
        if row_id in known:
            numbers.append(known[row_id])
        else:
            numbers.append(following)
            following += 1
    return numbers


def with_carried_numbers(df: pl.DataFrame, previous: pl.DataFrame | None) -> pl.DataFrame:
    """`df` (already in its deterministic order) with `human_readable_id` carried over from `previous`."""
    numbers = carried_numbers(df["id"].to_list(), previous)
    return df.with_columns(pl.Series("human_readable_id", numbers, dtype=pl.Int64))
