"""A round's work items cut into partitions. A plan gives its items as a list of dicts, or as a polars frame (one
row per item, an `item_id` column): a frame's dicts are made one partition at a time, when it is dispatched, and
let go when it is done. At 100M tokens the text units' texts as Python dicts were ~0.5 GB of the driver's memory
per step, twice over while extraction and the text units' embedding ran side by side; as a frame they are the
text_units table's own Arrow buffers.

Partitions are cut from the items sorted by id (a frame's by an index, not by a sorted copy of its texts), so the
same work gets the same partitions every run whichever way a plan gives it."""

from __future__ import annotations

from typing import Any

import polars as pl

Items = list[dict] | pl.DataFrame


class Part:
    """One partition's items: their ids (what its marker fingerprints) and, on demand, their dicts."""

    def __init__(self, ids: list[str], items: list[dict] | None = None, frame: pl.DataFrame | None = None, rows=None):
        self.ids = ids
        self._items, self._frame, self._rows = items, frame, rows

    def __len__(self) -> int:
        return len(self.ids)

    def items(self) -> list[dict]:
        """The items as dicts, in id order (a frame's made now, kept until `release`)."""
        if self._items is None:
            self._items = self._frame[self._rows].to_dicts()
        return self._items

    def values(self, column: str) -> list[Any]:
        """One field of every item, in id order (a frame's read from its column, no dicts made)."""
        if self._items is None and self._frame is not None:
            return self._frame[column].gather(self._rows).to_list()
        return [item[column] for item in self.items()]

    def release(self) -> None:
        """A frame's partition lets its dicts go once done (a list's are the plan's own)."""
        if self._frame is not None:
            self._items = None


def item_count(items: Items) -> int:
    return items.height if isinstance(items, pl.DataFrame) else len(items)


def sorted_items(items: Items) -> Items:
    """A list sorted by id; a frame as it is (partitions() orders it by an index)."""
    return items if isinstance(items, pl.DataFrame) else sorted(items, key=lambda it: it["item_id"])


def partitions(items: Items, size: int) -> list[Part]:
    """The items cut into partitions of `size`, in id order."""
    if isinstance(items, pl.DataFrame):
        order = items["item_id"].arg_sort()
        ids = items["item_id"].gather(order).to_list()
        return [Part(ids[i : i + size], frame=items, rows=order[i : i + size]) for i in range(0, len(ids), size)]
    items = sorted_items(items)
    return [
        Part([it["item_id"] for it in items[i : i + size]], items=items[i : i + size])
        for i in range(0, len(items), size)
    ]
