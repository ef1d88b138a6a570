"""Embedding inputs are counted once; a short input with no TPM limit is bounded by its UTF-8 size instead."""

import pytest

import graphrag_ray.llm.call_path as call_path
from graphrag_ray.config.settings import ModelConfig, RateLimitConfig
from graphrag_ray.llm.cache import open_cache
from graphrag_ray.llm.embedding import EmbeddingModel
from graphrag_ray.llm.ledger import UsageLedger
from graphrag_ray.llm.ratelimit import LocalRateLimiter
from graphrag_ray.llm.tokens import Tokenizer


def _model(**config) -> EmbeddingModel:
    return EmbeddingModel(
        "e",
        ModelConfig(type="embedding", model="text-embedding-3-small", **config),
        cache=open_cache(None),
        limiter=LocalRateLimiter(),
        ledger=UsageLedger(),
    )


@pytest.fixture
def counted(monkeypatch):
    """Calls that needed the tokenizer."""
    calls = []
    real = call_path.tokenizer_for

    def spy(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(call_path, "tokenizer_for", spy)
    return calls


def test_a_short_query_is_batched_without_loading_a_tokenizer(counted):
    texts = ["李明在杭州开的咖啡店叫什么?"]
    emb = _model()
    assert emb.counts(texts) == [len(texts[0].encode("utf-8"))]
    assert emb.batches(texts, emb.counts(texts)) == [[0]]
    assert counted == []


def test_exact_counts_whenever_they_could_change_batching_truncation_or_the_reservation(counted):
    tok = Tokenizer("cl100k_base")
    many = [f"supplier {i} of coffee beans" for i in range(20)]  # more than batch_size 16
    long = ["咖啡 " * 5000]  # more bytes than batch_max_tokens 8191
    for texts, config in ((many, {}), (long, {}), (["short"], {"rate_limit": RateLimitConfig(tpm=100_000)})):
        emb = _model(**config)
        counted.clear()
        assert emb.counts(texts) == [tok.count(t) for t in texts]
        assert counted, "exact counts come from the tokenizer"
    # the byte bound never changes the batches: the same texts batch alike either way when they fit one batch
    small = ["李明", "王芳 coffee", "张伟"]
    assert _model().batches(small, _model().counts(small)) == _model().batches(small, [tok.count(t) for t in small])
