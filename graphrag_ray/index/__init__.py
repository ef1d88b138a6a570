"""Indexing: methods as plain lists of steps (steps/, one file each), run by the executor (exec/).

pipeline.py    the methods and one index run: lock, run id, endpoint checks, executor, publish
steps/         the index steps: load_documents, chunk, extract_graph, ..., finalize
input.py       finding input files and checking their columns
units.py       the corpus as text units without a run (estimate and prompt-tune read it)
graph_rows.py  the last part of building entity and relationship rows (merge and resolution share it)
carry.py       what an update carries from the previous version (human-readable ids, community numbers)
changes.py     what an update changed (`changes.json`)
estimate.py    `estimate` / `index --dry-run`: calls and cost before anything is spent
prompt_tune.py `prompt-tune`: prompts fitted to the corpus
lock.py        one index run per root at a time
"""
