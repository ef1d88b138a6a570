"""Query methods side by side, sharing one context-building toolkit (context/).

engine.py        what every method shares: index, models, prompts; search / stream_search / context-only
local.py, global_search.py, drift.py, basic.py, hybrid.py   the methods; multi.py: several indexes at once
router.py        `--method auto`; methods.py: method names and the checks a question gets before loading
extractive.py    answers with no LLM (evidence sentences, cited)
question_gen.py  candidate next questions; chat.py: the conversation loop
index_data.py    a loaded index (tables, lookups, vectors); result.py: what a method returns and what it cost
factory.py       an engine for a method
"""
