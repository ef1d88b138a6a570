"""Embedding models: batches of texts through the same call path as chat (cache -> retry -> limiter -> client,
recorded in the ledger), or vectors computed here with no endpoint (`type: local_embedding`)."""

from __future__ import annotations

import asyncio

import numpy as np

from graphrag_ray.config.settings import ModelConfig
from graphrag_ray.llm.cache import cache_key, pack_rows, pack_vectors, unpack_vectors
from graphrag_ray.llm.call_path import ModelBase
from graphrag_ray.llm.tokens import at_most_tokens


class EmbeddingModel(ModelBase):
    def batches(self, texts: list[str], counts: list[int] | None = None) -> list[list[int]]:
        """Indices of `texts` grouped by batch_size and batch_max_tokens."""
        counts = counts if counts is not None else self.counts(texts)
        out, current, tokens = [], [], 0
        for i, n in enumerate(counts):
            if current and (len(current) >= self.config.batch_size or tokens + n > self.config.batch_max_tokens):
                out.append(current)
                current, tokens = [], 0
            current.append(i)
            tokens += n
        if current:
            out.append(current)
        return out

    def counts(self, texts: list[str]) -> list[int]:
        """Token counts for batching, truncation and the TPM reservation - counted once per text. With no TPM
        limit, UTF-8 byte lengths stand in when they already put every text in one batch untruncated (a token
        is at least one byte, so the batching is the same) - a query's embedding then loads no tokenizer."""
        sizes = [at_most_tokens(text) for text in texts]
        if (
            not self.config.rate_limit.tpm
            and len(texts) <= self.config.batch_size
            and sum(sizes) <= self.config.batch_max_tokens
        ):
            return sizes
        count = self.tokenizer.count
        return [count(text) for text in texts]

    async def embed(self, texts: list[str], *, stage: str) -> list[np.ndarray]:
        """One vector (float32, 1-D) per text. Each text's vector is cached under its own key (model, dimensions, the text sent):
        only texts never embedded are sent, in batches of those alone - so a corpus that changed a little is
        embedded a little, whatever batches the other texts once travelled in."""
        limit = self.config.batch_max_tokens
        counts = self.counts(texts)
        sent = [text if n <= limit else _truncate(self.tokenizer, text, limit) for text, n in zip(texts, counts)]
        keys = [
            cache_key("embedding", self.config.model, {"text": text, "dimensions": self.config.dimensions})
            for text in sent
        ]
        vectors: list[np.ndarray | None] = [None] * len(texts)
        missing = []
        for i, key in enumerate(keys):
            hit = self.cache.get(key)
            if hit is None:
                missing.append(i)
            else:
                vectors[i] = unpack_vectors(hit)[0]
        if len(missing) < len(texts):
            self.usage.record(stage, self.config.model, cache_hits=len(texts) - len(missing))
        if missing:
            batches = self.batches([sent[i] for i in missing], [min(counts[i], limit) for i in missing])
            await asyncio.gather(
                *(
                    self._embed_batch([missing[j] for j in batch], sent, counts, keys, vectors, stage)
                    for batch in batches
                )
            )
        return vectors  # type: ignore[return-value]

    async def _embed_batch(
        self, idx: list[int], sent: list[str], counts: list[int], keys: list[str], vectors: list, stage: str
    ) -> None:
        batch = [sent[i] for i in idx]

        def reserve() -> tuple[int, int]:  # counted once a TPM limit is known (a byte count over-reserves)
            known = self.config.rate_limit.tpm or self.limiter.knows_limits(self.model_id)
            return (sum(min(counts[i], self.config.batch_max_tokens) for i in idx) if known else 0), 0

        async def send() -> tuple[dict, int, int]:
            vecs, used = await self.client.embed(batch)
            entry = pack_vectors(vecs)
            if not used:  # the server reported no usage: counted here
                used, entry["counted_here"] = sum(self.tokenizer.count(text) for text in batch), True
            return entry, used, 0

        entry, _ = await self._call(stage, None, reserve, send)
        for i, vec, row in zip(idx, unpack_vectors(entry), pack_rows(entry)):
            vectors[i] = vec
            self.cache.put(keys[i], {**row, "stage": stage})


class LocalEmbeddingModel:
    """`type: local_embedding`: hashed character n-gram vectors computed here - no endpoint, key or download."""

    def __init__(self, model_id: str, config: ModelConfig, **_):
        self.model_id = model_id
        self.config = config

    def batches(self, texts: list[str]) -> list[list[int]]:
        return [list(range(len(texts)))] if texts else []

    async def aclose(self) -> None:
        """No client to close: the vectors are computed here."""

    async def embed(self, texts: list[str], *, stage: str) -> list[np.ndarray]:
        from graphrag_ray.llm.local_embedding import ngram_vector

        return [np.asarray(ngram_vector(text, self.config.dimensions or 256), dtype=np.float32) for text in texts]


def _truncate(tokenizer, text: str, max_tokens: int) -> str:
    tokens = tokenizer.encode(text)
    return text if len(tokens) <= max_tokens else tokenizer.decode(tokens[:max_tokens])
