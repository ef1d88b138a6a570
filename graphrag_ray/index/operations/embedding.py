"""What the two embedding steps share (embed_text_units, beside extraction; embed, at the end): one item per
distinct text, vectors left in the run's partition files (`spilled`), an update's vectors carried from the version
it updates, and the manifest saying where each row's vector is.

The driver holds only the `embeddings` manifest - each row's id and target, and the item and partition file
holding its vector - and the index is published by reading those files one at a time (`vector_batches`). At 10M
tokens the vectors are ~270 MB, and gathered, joined and sorted in the driver they were several times that."""

from __future__ import annotations

from abc import abstractmethod

import numpy as np
import polars as pl

from graphrag_ray.exec.items import Items
from graphrag_ray.exec.step import ItemPlan, ItemStep, Rows, SpilledRows, StepContext, Tables
from graphrag_ray.storage.location import Store
from graphrag_ray.storage.schemas import RUN_SCHEMAS
from graphrag_ray.storage.tables import write_table
from graphrag_ray.storage.vectors import stored_vectors, vector_matrix

STAGE = "embed"


class EmbeddingPlan(ItemPlan):
    """An embedding step's driver side for one run: one item per distinct text, and in an update the vectors the
    previous version already holds (found by items(), written into the run by finish())."""

    def __init__(self, step: EmbeddingStep):
        super().__init__(step)
        self.found: pl.DataFrame | None = None  # an update: the vectors items() found, until finish()

    def items(self, ctx: StepContext, tables: Tables, round_index: int, earlier: Tables) -> Items:
        """One item per distinct text: a corpus repeats itself (boilerplate, quoted passages, the same document
        filed twice), and rows with the same text share one vector - sent once, however the partitions run. A
        frame of items (exec/items.py): where every text is new and distinct, the rows' own frame, no copy."""
        if not ctx.settings.embed_text.enabled:
            return []
        self.found = carried = self.carried(ctx, tables)  # read once: finish() writes them into the run
        rows = self.step.rows(tables)
        wanted = pl.struct("target", "text").is_first_distinct()
        if carried.height:
            known = carried.select("target", "text").with_columns(pl.lit(True).alias("_known"))
            found = rows.select("target", "text").join(known, on=["target", "text"], how="left", maintain_order="left")
            wanted = wanted & found["_known"].is_null()
        keep = rows.select(wanted.alias("keep"))["keep"]
        return rows if keep.all() else rows.filter(keep)

    def carried(self, ctx: StepContext, tables: Tables) -> pl.DataFrame:
        """An update: the vectors the version being updated holds for texts of this run (a vector depends on its
        text and the model only, and an update refuses a changed model), as rows of the run's vector files - one
        per distinct text, under the id of the first row with it (as items() sends it)."""
        schema = {"id": pl.String, "target": pl.String, "text": pl.String, "vector": pl.Binary}
        if ctx.previous is None or not ctx.settings.embed_text.enabled:
            return pl.DataFrame(schema=schema)
        rows = self.step.rows(tables)
        found = []
        for (target,), wanted in rows.partition_by("target", as_dict=True).items():
            stored = stored_vectors(ctx.previous.child("lancedb"), target)
            if stored is None:
                continue
            found.append(
                wanted.unique(["text"], keep="first", maintain_order=True)
                .join(stored.unique("text"), on="text", how="inner", maintain_order="left")
                .select(pl.col("item_id").alias("id"), "target", "text", "vector")
            )
        return pl.concat(found) if found else pl.DataFrame(schema=schema)

    def with_carried(self, ctx: StepContext, tables: Tables, vectors: SpilledRows) -> SpilledRows:
        """The run's vector files and, in an update, one more holding the vectors carried from the previous
        version (written into the run, so the index is published from the run's files alone)."""
        if ctx.previous is None:
            return vectors
        carried = self.found if self.found is not None else self.carried(ctx, tables)
        if not carried.height:
            return vectors
        folder = f"steps/{self.step.name}/carried"
        write_table(carried, vectors.store.child(folder), "embeddings", typed=False)
        return SpilledRows(vectors.store, [*vectors.paths, f"{folder}/embeddings.parquet"])

    def finish(self, ctx: StepContext, tables: Tables, yielded: Tables) -> Tables:
        return self.step.finish_with(ctx, tables, self.with_carried(ctx, tables, yielded["embeddings"]))


class EmbeddingStep(ItemStep):
    uses_llm, settings_section = True, "embed_text"
    yields = {"embeddings": RUN_SCHEMAS["embedding_rows"]}
    spilled = ("embeddings",)
    partition_size = 256
    Plan = EmbeddingPlan

    def failure_source(self, item: dict) -> str:
        return item["target"]

    @abstractmethod
    def rows(self, tables: Tables) -> pl.DataFrame:
        """Every row that gets a vector: a frame of (item_id, target, text), all strings."""

    @abstractmethod
    def finish_with(self, ctx: StepContext, tables: Tables, vectors: SpilledRows) -> Tables:
        """The step's tables from the run's vector files (an update's carried vectors among them)."""

    def manifest(self, tables: Tables, vectors: SpilledRows) -> pl.DataFrame:
        """Every row that gets a vector, and where that vector is: the item embedded for its text (the first row
        with that text, as in items()) and the partition file holding it. A text whose embedding failed has a
        failures row and no vector, so no manifest row."""
        rows = self.rows(tables).with_columns(pl.col("item_id").first().over(["target", "text"]).alias("holder"))
        where = [vectors.read(path, ["id"]).with_columns(pl.lit(path).alias("file")) for path in vectors.paths]
        found = pl.concat(where) if where else pl.DataFrame(schema={"id": pl.String, "file": pl.String})
        return (
            rows.join(found.rename({"id": "holder"}), on="holder", how="inner")
            .select(pl.col("item_id").alias("id"), "target", pl.col("holder").alias("item_id"), "file")
            .cast(RUN_SCHEMAS["embeddings"])
        )

    async def process_batch(self, ctx: StepContext, items: list[dict], models) -> Rows:
        # a batch whose embedding cannot be had is a failures row per item (worker.py): those texts get no vector
        embedder = models.embedding(ctx.settings.embed_text.model_id)
        vectors = await embedder.embed([it["text"] for it in items], stage=STAGE)
        return {
            "embeddings": [
                {
                    "id": it["item_id"],
                    "target": it["target"],
                    "text": it["text"],
                    "vector": np.asarray(vec, dtype=np.float32).tobytes(),
                }
                for it, vec in zip(items, vectors)
            ]
        }


def vector_batches(run: Store, manifest: pl.DataFrame):
    """(ids, texts, float32 matrix) for the manifest's rows, one partition file at a time, in the manifest's order
    of files (deterministic: it is sorted, and partitions are cut from sorted items)."""
    files = manifest.partition_by("file", maintain_order=True, as_dict=True)
    spilled = SpilledRows(run, [path for (path,) in files])
    for (path,), rows in files.items():
        stored = spilled.read(path, ["id", "text", "vector"]).rename({"id": "item_id"})
        joined = rows.select("id", "item_id").join(stored, on="item_id", how="inner", maintain_order="left")
        yield joined["id"].to_list(), joined["text"].to_list(), vector_matrix(joined["vector"])
