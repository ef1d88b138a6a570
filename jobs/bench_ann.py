"""Benchmark: recall and latency of the vector search queries use on a table large enough for an ANN index.

Writes `--rows` clustered vectors of `--dim` dimensions with the index's own writer (write_vectors, cosine, the
index type of `--ann-index`, default embed_text.ann_index)
and asks `--queries` queries near random rows, comparing the top 10 with exact search (numpy over every row):
recall@10 and p50 / p95 latency, for LanceDB's defaults and for the settings queries use (embed_text.nprobes,
refine_factor). Issue 17's target: recall@10 >= 0.95 with p50 <= 20 ms at 200k rows.

    python jobs/bench_ann.py --rows 200000 --dim 1536
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from graphrag_ray.config.settings import EmbedConfig
from graphrag_ray.storage.vectors import LanceVectors, open_vectors, write_vectors


def clustered(rows: int, dim: int, clusters: int, seed: int = 7) -> np.ndarray:
    """Vectors around `clusters` centres, as embeddings of a corpus's topics are."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, dim)).astype(np.float32)
    out = np.empty((rows, dim), dtype=np.float32)
    step = 20_000
    for start in range(0, rows, step):
        n = min(step, rows - start)
        out[start : start + n] = centres[rng.integers(0, clusters, n)] + 0.6 * rng.normal(size=(n, dim))
    return out


def exact_top(matrix_unit: np.ndarray, query: np.ndarray, k: int) -> set[int]:
    scores = matrix_unit @ (query / np.linalg.norm(query))
    return set(np.argpartition(-scores, k)[:k].tolist())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--dim", type=int, default=1536)
    parser.add_argument("--clusters", type=int, default=500)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--ann-index", default=EmbedConfig().ann_index, choices=["ivf_hnsw_sq", "ivf_pq"])
    args = parser.parse_args()
    folder = (args.workdir or Path(tempfile.mkdtemp(prefix="bench-ann-"))) / "lancedb"
    matrix = clustered(args.rows, args.dim, args.clusters)
    ids = [f"r{i:07d}" for i in range(args.rows)]
    started = time.perf_counter()
    write_vectors(
        folder, "entity_description", ids, [""] * args.rows, matrix, ann_index_rows=1, ann_index=args.ann_index
    )
    build_s = time.perf_counter() - started
    unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    rng = np.random.default_rng(11)
    queries = [
        matrix[i] + 0.3 * rng.normal(size=args.dim).astype(np.float32) for i in rng.integers(0, args.rows, args.queries)
    ]
    truth = [exact_top(unit, q, 10) for q in queries]
    table = open_vectors(folder, "entity_description")
    defaults = EmbedConfig()
    configured = LanceVectors(table, defaults.nprobes, defaults.refine_factor)  # refine_factor by the index
    print(
        f"{args.rows:,} rows x {args.dim} dims, {args.clusters} clusters; table + {args.ann_index} index "
        f"written in {build_s:.0f} s; {args.queries} queries near random rows"
    )
    print(f"{'search':<34}{'recall@10':>10}{'p50 ms':>9}{'p95 ms':>9}")
    for label, search in (
        ("LanceDB defaults", None),
        (f"nprobes {configured.nprobes}, refine_factor {configured.refine_factor}", configured),
    ):
        recalls, times = [], []
        for query, expected in zip(queries, truth):
            t0 = time.perf_counter()
            if search is None:
                hits = [
                    h["id"]
                    for h in table.search(query.tolist())
                    .metric("cosine")
                    .limit(10)
                    .select(["id", "_distance"])
                    .to_list()
                ]
            else:
                hits = search.nearest(query.tolist(), 10)
            times.append(1000 * (time.perf_counter() - t0))
            recalls.append(len({int(h[1:]) for h in hits} & expected) / 10)
        times.sort()
        print(
            f"{label:<34}{statistics.mean(recalls):>10.3f}{statistics.median(times):>9.1f}"
            f"{times[int(0.95 * len(times)) - 1]:>9.1f}"
        )


if __name__ == "__main__":
    main()
