"""Load documents (index/input.py finds and reads the files) into the documents table.

PDF, Office, HTML and EPUB files arrive parsed (parse_documents). A document with no text, or an unreadable file, goes to `failures` and the rest is indexed; a table-like file
without the text column stops the run before any LLM call, naming the columns it has. Two rows with the same id
column value: the first is kept, the second recorded as a failure.
"""

from __future__ import annotations

from graphrag_ray.exec.step import BatchStep, StepContext, Tables
from graphrag_ray.index.operations.documents import load_documents


class LoadDocuments(BatchStep):
    name = "load_documents"
    optional_reads = ("parsed_documents",)  # PDF / Office files' text (parse_documents)
    writes = ("documents", "failures")

    def run(self, ctx: StepContext, tables: Tables) -> Tables:
        documents, failures = load_documents(ctx, tables.get("parsed_documents"))
        return {"documents": documents, "failures": failures}


STEP = LoadDocuments()
