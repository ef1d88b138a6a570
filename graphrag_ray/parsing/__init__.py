"""Parsers shared by index, query, eval and the simulator: tolerant readers of LLM output (tuples, JSON) and of
the `-----Name-----` context tables. They import nothing else of ours."""
