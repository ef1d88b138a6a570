"""Parse PDF, Word, PowerPoint, Excel, HTML and EPUB files into text with their structure (index/formats.py), one
file per item, on workers like any other step; load_documents takes their text from here.

An update parses only the files whose bytes changed: an item is the file's name and content hash
(`carries_results`), so an unchanged file's parse is carried from the version being updated. A file that cannot
be read is a row with its reason (`error`), which load_documents records in `failures`; the run goes on.
"""

from __future__ import annotations

import hashlib

from graphrag_ray.exec.step import ItemStep, Rows, StepContext, Tables
from graphrag_ray.index.formats import CONVERTED, parsed_row
from graphrag_ray.index.input import discover, kind_of
from graphrag_ray.storage.schemas import RUN_SCHEMAS


class ParseDocuments(ItemStep):
    name = "parse_documents"
    writes = ("parsed_documents",)
    yields = {"parsed_documents": RUN_SCHEMAS["parsed_documents"]}
    carries_results = True
    partition_size = 8  # a long PDF takes seconds: spread the files over the workers in small partitions

    def items(self, ctx: StepContext, tables: Tables, round_index: int, earlier: Tables) -> list[dict]:
        converted = set(CONVERTED.values())
        return [
            {
                "item_id": file.source,
                "file": file,
                "kind": kind,
                "sha256": hashlib.sha256(file.read_bytes()).hexdigest(),
            }
            for file in discover(ctx.settings, ctx.root)
            if (kind := kind_of(ctx.settings, file)) in converted
        ]

    def carry_identity(self, item: dict) -> tuple:
        return item["item_id"], item["kind"], item["sha256"]  # not the file handle: its store and times

    def failure_source(self, item: dict) -> str:
        return item["item_id"]

    async def process(self, ctx: StepContext, item: dict, models) -> Rows:
        return {"parsed_documents": [parsed_row(item["file"], item["kind"])]}

    def finish(self, ctx: StepContext, tables: Tables, yielded: Tables) -> Tables:
        return {"parsed_documents": yielded["parsed_documents"].sort("source")}


STEP = ParseDocuments()
