"""graphrag-ray: Microsoft GraphRAG's method as a distributed, resumable batch engine on Ray."""

from graphrag_ray import deferred_imports as _deferred_imports

__version__ = "0.1.0"

# before anything imports openai or lancedb: their unused eager imports are ~1 s of every command and worker start
_deferred_imports.install()
