"""What an update carries over from the previous version: the numbers people and prompts see.

A row that exists in the previous version (same id - ids are content hashes) keeps its human-readable number; new
rows are numbered after the previous ones, in the order given. With no previous version this is plain numbering
0, 1, 2, ... in that order - a full build is unchanged. Stable numbers keep the prompts of untouched communities
identical, so their reports are cache hits. A community that gained or lost a few members is still that community
(`carried_community_numbers`): its number, and so its report's, stays."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import polars as pl


def carried_numbers(
    ids: list[str],
    previous: pl.DataFrame | None,
    column: str = "human_readable_id",
    successor: Callable[[int], int | None] | None = None,
) -> list[int]:
    """The number of each id, in `ids` order: the previous one where the id existed, else the one `successor(i)`
    finds for the i-th (a row that changed but is still the same one), else the next free one."""
    if previous is None or not previous.height:
        return list(range(len(ids)))
    known = dict(zip(previous["id"].to_list(), previous[column].to_list()))
    following = max(known.values(), default=-1) + 1
    numbers = []
    for i, row_id in enumerate(ids):
        number = known.get(row_id)
        if number is None and successor is not None:
            number = successor(i)
        if number is None:
            number, following = following, following + 1
        numbers.append(number)
    return numbers


def with_carried_numbers(df: pl.DataFrame, previous: pl.DataFrame | None) -> pl.DataFrame:
    """`df` (already in its deterministic order) with `human_readable_id` carried over from `previous`."""
    numbers = carried_numbers(df["id"].to_list(), previous)
    return df.with_columns(pl.Series("human_readable_id", numbers, dtype=pl.Int64))


def carried_community_numbers(
    ids: list[str], levels: list[int], members: list[list[str]], previous: pl.DataFrame | None
) -> list[int]:
    """The number of each community (`ids`, with its level and member entity ids): the previous one where the
    same community existed (same id: same level and members); else that of the previous community of its level
    with which it shares most of both's members - it changed, and keeps its number, so citations of its report,
    the report's revision and changes.json follow it; else the next free number. "Most of both" makes the match one
    to one: the communities of a level are disjoint, in either version."""
    if previous is None or not previous.height:
        return list(range(len(ids)))
    where: dict[tuple[int, str], int] = {}
    size: dict[int, int] = {}
    for level, number, entity_ids in previous.select("level", "community", "entity_ids").iter_rows():
        size[number] = len(entity_ids)
        where.update(((level, e), number) for e in entity_ids)

    def successor(i: int) -> int | None:
        shared = Counter(where[(levels[i], e)] for e in members[i] if (levels[i], e) in where)
        best = min(shared, key=lambda c: (-shared[c], c), default=None)
        return best if best is not None and 2 * shared[best] > max(len(members[i]), size[best]) else None

    return carried_numbers(ids, previous, "community", successor)
