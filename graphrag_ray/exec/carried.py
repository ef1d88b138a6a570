"""Results an item step carries from the version an update starts from, instead of computing them again.

A step that sets `carries_results` has its rows kept per item in the published version (`carried/<step>/`), each
row with the key of the item that yielded it: a digest of the whole item dict (text, descriptions, context - all
that `process` reads besides settings, prompts and the cache, and an update refuses when those changed), or of
the part of it the step names as what its result is about (`carry_identity`: a report, its members and their
descriptions, not their degrees). In an
update, an item whose key the previous version lists as done gets that version's rows, with no worker, no call and
no cache lookup; only the other items are dispatched. So an update's work follows the change, not the corpus; a
row computed here or carried is the same row (the key is the whole input), and a full build of the same corpus
gives the same tables. An item that failed is not listed as done: the next run asks for it again.

    carried/<step>/items.parquet     the keys of the items that finished (column `key`)
    carried/<step>/<table>.parquet   every yielded row, with its item's key in column `_item_key`
"""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

import polars as pl

from graphrag_ray.exec.items import Items, Part
from graphrag_ray.storage.location import Store
from graphrag_ray.storage.tables import read_table

KEY_COLUMN = "_item_key"
KEY = "_key"  # set on each item dict (after its key is computed from the rest of it)
FOLDER = "carried"


def item_key(identity) -> str:
    """The digest of what defines an item (`ItemStep.carry_identity`: the whole item dict, its key excluded, unless
    the step says less). Pickled, not JSON: ten times faster on a report's context. Equal bytes mean equal items
    (pickle is lossless); equal items built by the same code give equal bytes - and where they might not (an object
    shared within one item is pickled once), the item is only computed again, never wrongly carried."""
    if isinstance(identity, dict) and KEY in identity:
        identity = {k: v for k, v in identity.items() if k != KEY}
    return hashlib.blake2b(pickle.dumps(identity, protocol=5), digest_size=16).hexdigest()


def run_table_name(step: str, table: str) -> str:
    """Where a run keeps a step's rows with their keys until it publishes them."""
    return f"carried__{step}__{table}"


class PreviousResults:
    """One step's carried rows in a published version (none when that version has no `carried/<step>/`)."""

    def __init__(self, version: Store | None, step: str):
        self.folder = version.child(f"{FOLDER}/{step}") if version is not None else None
        done = read_table(self.folder, "items") if self.folder is not None else None
        self.done: set[str] = set(done["key"].to_list()) if done is not None else set()

    def rows(self, table: str, keys: set[str], schema: dict) -> pl.DataFrame:
        """The rows the items with these keys yielded into `table` (with their key column)."""
        found = read_table(self.folder, table) if keys else None
        if found is None:
            return pl.DataFrame(schema={**schema, KEY_COLUMN: pl.String})
        return found.filter(pl.col(KEY_COLUMN).is_in(list(keys)))


def publish_carried(run_store: Store, folder, step: str, tables: list[str]) -> None:
    """Copy a run's carried rows of `step` into a version being written (`folder`: its local directory), file to
    file: at 10M tokens the extraction rows are large, and read whole they would set the driver's peak memory."""
    target = Path(folder) / FOLDER / step
    target.mkdir(parents=True, exist_ok=True)
    for table in ["items", *tables]:
        run_store.copy_to(f"tables/{run_table_name(step, table)}.parquet", target / f"{table}.parquet")


class ItemKeys:
    """One carrying step's items in a run: their keys, which the previous version computed (taken from it), which
    finished here, and each row's item (its key column)."""

    def __init__(self, step, previous: Store | None):
        self.step = step
        self.previous = PreviousResults(previous, step.name) if previous is not None else None
        self.position: dict[str, int] = {}  # key -> the item's place in a full build's order (round, then id)
        self.done: list[str] = []
        self.offset = 0  # items seen in earlier rounds
        self.carried_in_round = 0
        self.any_carried = False

    def split(self, round_index: int, items: Items) -> tuple[Items, dict[str, pl.DataFrame]]:
        """(the items to compute, the rows carried for the others) of one round; a list of items sorted by id, or
        a frame (exec/items.py: its keys are made a slice of rows at a time, into a column)."""
        if isinstance(items, pl.DataFrame):
            return self._split_frame(items)
        todo, carried = [], set()
        offset = self.offset
        self.offset += len(items)
        for i, item in enumerate(items):
            key = item[KEY] = item_key(self.step.carry_identity(item))
            if self.previous is not None and self.previous.done:  # only an update interleaves carried rows
                self.position[key] = offset + i
            if self.previous is not None and key in self.previous.done:
                carried.add(key)
            else:
                todo.append(item)
        return todo, self._carried(carried)

    def _split_frame(self, items: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, pl.DataFrame]]:
        keys = [
            item_key(self.step.carry_identity(row))
            for chunk in items.iter_slices(2048)
            for row in chunk.iter_rows(named=True)
        ]
        frame = items.with_columns(pl.Series(KEY, keys, dtype=pl.String))
        offset = self.offset
        self.offset += frame.height
        if self.previous is None:
            return frame, {}
        if self.previous.done:  # an item's place in id order, as the list's
            places = frame["item_id"].arg_sort().arg_sort().to_list()
            self.position.update((key, offset + place) for key, place in zip(keys, places))
        carried = {key for key in keys if key in self.previous.done}
        todo = frame.filter(~pl.col(KEY).is_in(list(carried))) if carried else frame
        return todo, self._carried(carried)

    def _carried(self, carried: set[str]) -> dict[str, pl.DataFrame]:
        """The previous version's rows of the items carried in this round."""
        self.carried_in_round = len(carried)
        if not carried:
            return {}
        self.any_carried = True
        self.done += sorted(carried)
        return {name: self.previous.rows(name, carried, schema) for name, schema in self.step.yields.items()}

    def tagged(self, part: Part, frames: dict[str, pl.DataFrame], spans: dict[str, list[int]]):
        """A computed partition's frames, each row with its item's key (`spans`: rows per item, per table)."""
        out = dict(frames)
        item_keys = part.values(KEY)
        for name, counts in spans.items():
            if name == "failures":
                continue
            keys = [key for key, n in zip(item_keys, counts) for _ in range(n)]
            out[name] = frames[name].with_columns(pl.Series(KEY_COLUMN, keys, dtype=pl.String))
        return out

    def finished(self, part: Part, failures: pl.DataFrame | None) -> None:
        failed = set(failures["item_id"].to_list()) if failures is not None and failures.height else set()
        self.done += [key for key, item_id in zip(part.values(KEY), part.ids) if item_id not in failed]

    def save(self, run, yielded: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
        """Keep the rows with their keys in the run (published with the index); returns them without the keys,
        in a full build's order (an update's carried rows and computed ones are interleaved as a build's are)."""
        name = self.step.name
        kept = {}
        for table, df in yielded.items():
            if KEY_COLUMN not in df.columns:
                df = df.with_columns(pl.lit(None, dtype=pl.String).alias(KEY_COLUMN))
            if self.any_carried and df.height:
                order = pl.col(KEY_COLUMN).replace_strict(self.position, default=None, return_dtype=pl.Int64)
                df = df.sort(order, maintain_order=True)
            kept[run_table_name(name, table)] = df
        kept[run_table_name(name, "items")] = pl.DataFrame({"key": sorted(self.done)}, schema={"key": pl.String})
        run.save_tables(kept)
        return {table: kept[run_table_name(name, table)].drop(KEY_COLUMN) for table in yielded}
