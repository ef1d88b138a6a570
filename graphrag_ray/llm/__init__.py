"""LLM access in visible layers, innermost first:

client.py     one HTTP call through the openai SDK (its own retries off)
ratelimit.py  one RPM/TPM limiter for the whole job (a Ray actor shared by every worker on every node):
              every attempt reserves, so a retried request is limited like a new one; rate_window.py
              holds one model's sliding-window and adaptive-rate arithmetic
retry.py      tenacity: backoff with jitter on 429/5xx/timeouts/drops; 400/401/403/404 stop at once
cache.py      content-addressed response cache: a re-run of the same work makes zero calls
ledger.py     usage ledger: calls, tokens, cache hits, retries, 429s and cost per stage and model
call_path.py  the call path composing the layers above once (ModelBase), for chat and embeddings alike
model.py      ChatModel over it (an unusable answer is asked again once, changed)
embedding.py  EmbeddingModel (same call path) and LocalEmbeddingModel (vectors computed here)
models.py     Models: the model entries of one command, sharing one cache, limiter and ledger; it owns
              their SDK clients and closes them on each loop it used (`aclose`, `run`)
preflight.py  endpoint checks before spending, and `graphrag-ray check`
tokens.py     tiktoken token counting that works with no internet
"""
