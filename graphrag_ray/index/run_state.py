"""A run's work in progress on disk (ROOT/runs/<run-id>/): step outputs and completion markers.

    tables/<table>.parquet                      outputs of finished steps
    steps/<step>/r<round>/p<part>/<t>.parquet   outputs of finished partitions of item steps
    steps/<step>/r<round>/p<part>/ledger.json   what that partition spent
    _done/<step>                                a step is complete
    _done/<step>/r<round>-p<part>               a partition is complete (written after its outputs)
Resume reads only this folder: a completed partition is never recomputed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl

from graphrag_ray.storage.location import write_atomic_bytes
from graphrag_ray.storage.tables import read_table, write_table


class RunState:
    def __init__(self, folder: Path):
        self.dir = folder
        self.tables_dir = folder / "tables"

    def reset(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    # steps -----------------------------------------------------------------------------------------
    def step_done(self, step: str) -> bool:
        return (self.dir / "_done" / f"{step}.step").exists()

    def mark_step(self, step: str, stats: dict) -> None:
        write_atomic_bytes(self.dir / "_done" / f"{step}.step", json.dumps(stats, indent=2).encode())

    def step_stats(self, step: str) -> dict:
        return json.loads((self.dir / "_done" / f"{step}.step").read_text())

    def save_tables(self, tables: dict[str, pl.DataFrame]) -> None:
        for name, df in tables.items():
            write_table(df, self.tables_dir, name, typed=False)

    def load_table(self, name: str) -> pl.DataFrame | None:
        return read_table(self.tables_dir, name)

    # partitions ------------------------------------------------------------------------------------
    def _part_dir(self, step: str, round_index: int, part: int) -> Path:
        return self.dir / "steps" / step / f"r{round_index}" / f"p{part:05d}"

    def _marker(self, step: str, round_index: int, part: int) -> Path:
        return self.dir / "_done" / step / f"r{round_index}-p{part:05d}"

    def partition_done(self, step: str, round_index: int, part: int, fingerprint: str) -> bool:
        """Done, and done for exactly these items (the marker holds a fingerprint of the item ids)."""
        marker = self._marker(step, round_index, part)
        return marker.exists() and marker.read_text() == fingerprint

    def save_partition(self, step: str, round_index: int, part: int, frames: dict[str, pl.DataFrame],
                       ledger: dict, fingerprint: str) -> None:
        folder = self._part_dir(step, round_index, part)
        for name, df in frames.items():
            write_table(df, folder, name, schema_name=None, typed=False)
        write_atomic_bytes(folder / "ledger.json", json.dumps(ledger).encode())
        write_atomic_bytes(self._marker(step, round_index, part), fingerprint.encode())

    def load_partition(self, step: str, round_index: int, part: int, names) -> tuple[dict, dict]:
        folder = self._part_dir(step, round_index, part)
        frames = {name: read_table(folder, name) for name in names}
        ledger = json.loads((folder / "ledger.json").read_text())
        return {k: v for k, v in frames.items() if v is not None}, ledger
