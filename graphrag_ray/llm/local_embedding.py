"""Hashed character n-gram vectors: an embedding that needs no model download and suits Chinese and English.

Used by the simulator's /v1/embeddings (so similarity is meaningful in tests and rehearsals) and by the
offline `local` embedding model.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

_WORD = re.compile(r"[A-Za-z0-9]+|[\u3400-\u9fff]")


def ngram_vector(text: str, dim: int = 256) -> list[float]:
    tokens = [t.lower() for t in _WORD.findall(text)]
    grams = tokens + [a + b for a, b in zip(tokens, tokens[1:])]
    vec = np.zeros(dim, dtype=np.float32)
    for gram in grams:
        h = int.from_bytes(hashlib.blake2b(gram.encode(), digest_size=8).digest(), "little")
        vec[h % dim] += 1.0 if (h >> 63) & 1 else -1.0
    norm = float(np.linalg.norm(vec))
    if norm == 0:
        vec[0] = 1.0
        norm = 1.0
    return (vec / norm).tolist()
