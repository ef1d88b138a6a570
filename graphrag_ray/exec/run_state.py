"""A run's work in progress (RUNS_DIR/<run-id>/, on any Store): step outputs and completion markers.

    tables/<table>.parquet                      outputs of finished steps
    steps/<step>/r<round>/p<part>/<t>.parquet   outputs of finished partitions of item steps (a table the
                                                partition yielded no row of has no file)
    _done/<step>.step                           a step is complete (its stats)
    _done/<step>/r<round>-p<part>               a partition is complete (written after its outputs): JSON with a
                                                fingerprint of its item ids and what it spent (and its step stats)
Resume reads only this folder: a completed partition is never recomputed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

import polars as pl

from graphrag_ray.exec.items import Part
from graphrag_ray.storage.location import Store
from graphrag_ray.storage.tables import read_table, scan_table, write_table


def fingerprint(items: list[dict] | Part) -> str:
    """Which items a partition held: a marker counts only for exactly the same items."""
    ids = items.ids if isinstance(items, Part) else [it["item_id"] for it in items]
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()


class RunState:
    def __init__(self, where: Store | str | Path):
        self.store = Store(where)

    @property
    def location(self) -> str:
        return self.store.location

    def reset(self) -> None:
        self.store.delete_tree()

    # steps -----------------------------------------------------------------------------------------
    def step_done(self, step: str) -> bool:
        return self.store.exists(f"_done/{step}.step")

    def mark_step(self, step: str, stats: dict) -> None:
        self.store.write_bytes(f"_done/{step}.step", json.dumps(stats, indent=2, default=str).encode())

    def step_stats(self, step: str) -> dict:
        return json.loads(self.store.read_bytes(f"_done/{step}.step") or b"{}")

    def save_ledger(self, ledger: dict) -> str:
        """What a stopped run spent (a finished run's ledger is published with the index); returns where."""
        self.store.write_bytes("ledger.json", json.dumps(ledger, indent=2).encode())
        return self.store.child("ledger.json").location

    def save_tables(self, tables: dict[str, pl.DataFrame]) -> None:
        for name, df in tables.items():
            write_table(df, self.store.child("tables"), name, typed=False)

    def load_table(self, name: str, columns: list[str] | None = None) -> pl.DataFrame | None:
        return read_table(self.store.child("tables"), name, columns)

    def scan_table(self, name: str) -> pl.LazyFrame | None:
        return scan_table(self.store.child("tables"), name)

    # partitions ------------------------------------------------------------------------------------
    @staticmethod
    def _part(step: str, round_index: int, part: int) -> str:
        return f"steps/{step}/r{round_index}/p{part:05d}"

    @staticmethod
    def _marker(step: str, round_index: int, part: int) -> str:
        return f"_done/{step}/r{round_index}-p{part:05d}"

    def _read_marker(self, step: str, round_index: int, part: int) -> dict | None:
        raw = self.store.read_bytes(self._marker(step, round_index, part))
        if raw is None:
            return None
        return json.loads(raw)

    def partition_done(self, step: str, round_index: int, part: int, items: list[dict]) -> bool:
        """Done, and done for exactly these items."""
        marker = self._read_marker(step, round_index, part)
        return marker is not None and marker["items"] == fingerprint(items)

    def save_partition(
        self, step: str, round_index: int, part: int, items: list[dict], frames: dict[str, pl.DataFrame], spent: dict
    ) -> None:
        """Only non-empty tables are written (every partition of a large run would otherwise write an empty
        failures file), and the ledger travels in the marker: one partition is as few file writes as it can be."""
        folder = self.store.child(self._part(step, round_index, part))
        for name, df in frames.items():
            if df.height:
                write_table(df, folder, name, typed=False)
        marker = {"items": fingerprint(items), "spent": spent}
        self.store.write_bytes(self._marker(step, round_index, part), json.dumps(marker).encode())

    def forget_partition(self, step: str, round_index: int, part: int) -> None:
        """Make a finished partition count as not done (a re-run computes it again)."""
        self.store.delete(self._marker(step, round_index, part))

    def partition_file(self, step: str, round_index: int, part: int, name: str) -> str | None:
        """The path (relative to this run) of a finished partition's `name` rows; None when it yielded none."""
        path = f"{self._part(step, round_index, part)}/{name}.parquet"
        return path if self.store.exists(path) else None

    def load_partition(self, step: str, round_index: int, part: int, names) -> tuple[dict, dict]:
        """The partition's tables (those it yielded rows of) and what it spent."""
        folder = self.store.child(self._part(step, round_index, part))
        frames = {name: read_table(folder, name) for name in names}
        marker = self._read_marker(step, round_index, part) or {}
        return {k: v for k, v in frames.items() if v is not None}, marker.get("spent", {})


class RunTables(Mapping):
    """Tables a run wrote, read from its folder each time one is asked for: a large index is published one table
    at a time instead of holding every table from its step to the end. `held` are tables kept in memory."""

    def __init__(self, run: RunState, names: set[str], held: dict[str, pl.DataFrame]):
        self.run, self.names, self.held = run, set(names), held

    def __getitem__(self, name: str) -> pl.DataFrame:
        if name in self.held:
            return self.held[name]
        df = self.run.load_table(name) if name in self.names else None
        if df is None:
            raise KeyError(name)
        return df

    def __contains__(self, name: object) -> bool:
        return name in self.held or (name in self.names and self.run.store.exists(f"tables/{name}.parquet"))

    def __iter__(self):
        return iter(sorted(self.names | set(self.held)))

    def __len__(self) -> int:
        return len(self.names | set(self.held))
