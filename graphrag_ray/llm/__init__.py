"""LLM access in visible layers, innermost first:

client.py      one request to the endpoint (http.py: JSON and server-sent events over one keep-alive session;
               Azure OpenAI through the openai SDK with its retries off); what it returns or raises (retryable or
               fatal) is outcomes.py's
ratelimit.py   one RPM/TPM limiter for the whole job (a Ray actor shared by every worker on every node): every
               attempt reserves, so a retried request is limited like a new one; rate_window.py holds one model's
               sliding-window and adaptive-rate arithmetic, concurrency.py how many calls a process keeps in flight
retry.py       tenacity: backoff with jitter on 429/5xx/timeouts/drops; 400/401/403/404 stop at once
cache.py       content-addressed response cache: a re-run of the same work makes zero calls
ledger.py      usage ledger: calls, tokens (cached ones apart), cache hits, retries, 429s and cost per stage and
               model (prices.py: what the provider bills; metrics.py: the same as Ray metrics)
call_path.py   the call path composing the layers above once (ModelBase), for chat and embeddings alike
model.py       ChatModel over it (an unusable answer is asked again once, changed); reasoning.py, request_shape.py
embedding.py   EmbeddingModel (same call path) and LocalEmbeddingModel (local_embedding.py: vectors computed here)
batch_api.py   the provider's Batch API (files, batches, results); batch_collect.py: calls that wait for a job
models.py      Models: the model entries of one command, sharing one cache, limiter and ledger; it owns their
               clients and closes them on each loop it used (`aclose`, `run`)
in_flight.py   what the process waits on (a question's deadline, deadline.py, says it)
preflight.py   endpoint checks before spending (endpoint.py), and `graphrag-ray check`
tokens.py      tiktoken token counting that works with no internet (tokenizer_files.py installs its files)
"""
