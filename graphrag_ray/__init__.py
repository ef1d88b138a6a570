"""graphrag-ray: Microsoft GraphRAG's method as a distributed, resumable batch engine on Ray."""

__version__ = "0.1.0"
