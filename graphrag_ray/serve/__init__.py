"""`graphrag-ray serve`: indexes behind OpenAI- and Ollama-compatible HTTP on Ray Serve.

protocol.py (model names, reply shapes) -> index_service.py (one index in a replica: tables, reloads, answers)
-> app.py (the HTTP routes, auth, errors, request log) -> deploy.py (Ray Serve deployments, the builder, the
command). Needs the `serve` extra (ray[serve]).
"""
