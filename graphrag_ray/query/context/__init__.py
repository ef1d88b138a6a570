"""The context-building toolkit every query method uses.

budget.py         token packing and GraphRAG's `-----Name-----` tables
entity_match.py   the entities a question names
graph_walk.py     text units ranked by personalised PageRank over entities and units
local_context.py  the local (entity-centred) mixed context
history.py        conversation history
"""
