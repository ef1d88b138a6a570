"""Benchmark: query engines on a synthetic index of 100k entities / 300k relationships / 10k reports.

Prints local context-build time p50 / p95 (target p50 <= 30 ms, the graph walk included) and global-search wall
time with 50 map batches against the simulator with a fixed per-call latency (target <= 1.3 x (one map call + one
reduce)).

    python jobs/bench_query.py --entities 100000 --relationships 300000 --reports 10000 --latency 1.0
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from graphrag_ray.config.settings import Settings
from graphrag_ray.llm.models import Models
from graphrag_ray.query.global_search import GlobalSearch
from graphrag_ray.query.index_data import IndexData
from graphrag_ray.query.local import LocalSearch
from graphrag_ray.simulate.process import SimulatorProcess
from graphrag_ray.storage.tables import write_table
from graphrag_ray.storage.vectors import write_vectors

WORDS = (
    "coffee supplier market harbor river council museum festival railway bakery school clinic bridge "
    "factory library garden orchestra stadium theater airport"
).split()


def synthetic_index(folder: Path, n_entities: int, n_rels: int, n_reports: int, n_units: int, dim: int = 64) -> None:
    rng = random.Random(7)
    ent_ids = [f"e{i:06d}" for i in range(n_entities)]
    unit_ids = [f"u{i:06d}" for i in range(n_units)]
    titles = [f"{WORDS[i % len(WORDS)].upper()} {i}" for i in range(n_entities)]
    src = np.array([rng.randrange(n_entities) for _ in range(n_rels)])
    dst = np.array([(s + 1 + rng.randrange(200)) % n_entities for s in src])
    degree = np.bincount(np.concatenate([src, dst]), minlength=n_entities)
    entities = pl.DataFrame(
        {
            "id": ent_ids,
            "human_readable_id": list(range(n_entities)),
            "title": titles,
            "type": ["ORGANIZATION"] * n_entities,
            "description": [
                f"{t} is a {WORDS[(i * 7) % len(WORDS)]} near the {WORDS[(i * 3) % len(WORDS)]}."
                for i, t in enumerate(titles)
            ],
            "text_unit_ids": [[unit_ids[i % n_units], unit_ids[(i * 7) % n_units]] for i in range(n_entities)],
            "frequency": [2] * n_entities,
            "degree": degree.tolist(),
        }
    )
    relationships = pl.DataFrame(
        {
            "id": [f"r{i:07d}" for i in range(n_rels)],
            "human_readable_id": list(range(n_rels)),
            "source": [titles[s] for s in src],
            "target": [titles[d] for d in dst],
            "description": [f"{titles[s]} works with {titles[d]}" for s, d in zip(src, dst)],
            "weight": [1.0] * n_rels,
            "combined_degree": (degree[src] + degree[dst]).tolist(),
            "text_unit_ids": [[unit_ids[s % n_units]] for s in src],
        }
    )
    units = pl.DataFrame(
        {
            "id": unit_ids,
            "human_readable_id": list(range(n_units)),
            "text": [
                " ".join(f"{WORDS[(i + k) % len(WORDS)]} {titles[(i * 13 + k) % n_entities]}" for k in range(60))
                for i in range(n_units)
            ],
            "n_tokens": [300] * n_units,
            "document_id": ["d0"] * n_units,
            "entity_ids": [[]] * n_units,
            "relationship_ids": [[]] * n_units,
            "covariate_ids": [[]] * n_units,
        }
    )
    level0 = 500
    comm_rows, rep_rows = [], []
    per = n_entities // n_reports
    for c in range(n_reports):
        level = 0 if c < level0 else 1
        parent = -1 if level == 0 else c % level0
        members = ent_ids[c * per : (c + 1) * per]
        comm_rows.append(
            {
                "id": f"c{c}",
                "human_readable_id": c,
                "community": c,
                "level": level,
                "parent": parent,
                "children": [],
                "title": f"Community {c}",
                "entity_ids": members,
                "relationship_ids": [],
                "text_unit_ids": [unit_ids[c % n_units]],
                "period": "2026-01-01",
                "size": len(members),
            }
        )
        body = " ".join(f"{WORDS[(c + k) % len(WORDS)]} activity number {k} in community {c}." for k in range(25))
        rep_rows.append(
            {
                "id": f"rep{c}",
                "human_readable_id": c,
                "community": c,
                "level": level,
                "parent": parent,
                "children": [],
                "title": f"Community {c} report",
                "summary": body[:200],
                "full_content": f"# Community {c}\n\n{body}",
                "rank": float(c % 10),
                "rating_explanation": "",
                "findings": [],
                "full_content_json": "{}",
                "period": "",
                "size": len(members),
            }
        )
    for name, df in (
        ("entities", entities),
        ("relationships", relationships),
        ("text_units", units),
        ("communities", pl.DataFrame(comm_rows)),
        ("community_reports", pl.DataFrame(rep_rows)),
    ):
        write_table(df, folder, name)
    vectors = np.random.default_rng(7).normal(size=(n_entities, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    write_vectors(
        folder / "lancedb",
        "entity_description",
        ent_ids,
        entities["description"].to_list(),
        vectors.tolist(),
        ann_index_rows=10**9,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--relationships", type=int, default=300_000)
    parser.add_argument("--reports", type=int, default=10_000)
    parser.add_argument("--units", type=int, default=30_000)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--executor", default="local", choices=["local", "ray"])
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-query-"))
    started = time.perf_counter()
    synthetic_index(folder, args.entities, args.relationships, args.reports, args.units)
    print(f"synthetic index built in {time.perf_counter() - started:.1f}s at {folder}")
    with SimulatorProcess(latency=args.latency, embedding_dim=64) as sim:
        model = {
            "api_base": sim.base_url,
            "api_key": "bench",
            "concurrency": 128,
            "request_timeout": 120,
            "stream_requests": "never",
        }  # the simulator stands for a hosted (https) provider
        settings = Settings.model_validate(
            {
                "models": {
                    "default_chat": {**model, "model": "gpt-4o-mini"},
                    "default_embedding": {**model, "type": "embedding", "model": "text-embedding-3-small"},
                },
                "cache": {"enabled": False},
            }
        )
        started = time.perf_counter()
        data = IndexData.load(folder)
        _ = (
            data.entity_rows,
            data.entity_by_title,
            data.relationships_by_title,
            data.text_unit_rows,
            data.communities_of_entity,
            data.report_by_community,
            data.community_rows,
        )
        load_s = time.perf_counter() - started
        started = time.perf_counter()  # built once per loaded index, on the first local query
        _ = (
            data.entity_matcher,
            data.graph_walk.weights(settings.local_search.ranking),
            data.lexical("entities"),
            data.lexical("text_units"),
        )
        walk_s = time.perf_counter() - started
        models = Models.create(settings, folder)
        local = LocalSearch(data, models, settings, root=folder)
        count = models.chat("default_chat").tokenizer.count

        async def local_times():
            from graphrag_ray.query.context.local_context import build_local_context

            rng = np.random.default_rng(1)
            table = data.vectors("entity_description")
            assemble, total = [], []
            for q in range(args.queries):
                query = f"What is known about {WORDS[q % len(WORDS)]} {q * 1997 % args.entities}?"
                vector = rng.normal(size=64).astype(np.float32)
                t0 = time.perf_counter()
                hits = table.nearest(vector.tolist(), 20)
                selected = [data.entity_rows[h] for h in hits[:10]]
                build_local_context(data, selected, settings.local_search, count, query=query)  # ppr ranking
                assemble.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                await local.build_context(query)  # with the query embedding call to the simulator
                total.append(time.perf_counter() - t0)
            return assemble, total

        settings.global_search.executor = args.executor
        report_tokens = sum(count(r) for r in data.reports_at_level(0)["full_content"].to_list())
        # reports are packed whole, so the budget is a little above the even share to land on ~args.batches
        settings.global_search.data_max_tokens = max(500, int(report_tokens / args.batches * 1.1))

        async def global_time(question: str):
            engine = GlobalSearch(data, models, settings, root=folder, community_level=0)
            t0 = time.perf_counter()
            result = await engine.search(question)
            return time.perf_counter() - t0, result

        assemble, total = models.run(local_times())
        if args.executor == "ray":
            import ray

            ray.init(include_dashboard=False, log_to_driver=False)
        models.run(global_time("Which festivals happen near the harbor?"))  # warm: connections, map worker
        wall, result = models.run(global_time("What are the main activities about coffee and markets?"))
    pct = lambda xs, p: sorted(xs)[min(len(xs) - 1, int(p * len(xs)))] * 1000  # noqa: E731
    figures = {
        "index_load_and_lookups_s": round(load_s, 2),
        "entity_matcher_graph_walk_and_lexical_build_s": round(walk_s, 2),
        "local_context_build_ms_p50": round(statistics.median(assemble) * 1000, 1),
        "local_context_build_ms_p95": round(pct(assemble, 0.95), 1),
        "local_context_with_query_embedding_ms_p50": round(statistics.median(total) * 1000, 1),
        "global_map_calls": result.details["map_calls"],
        "global_wall_s": round(wall, 2),
        "simulated_latency_per_call_s": args.latency,
        "global_wall_over_map_plus_reduce": round(wall / (2 * args.latency), 2),
        "global_executor": args.executor,
    }
    print(json.dumps(figures, indent=2))
    print(
        f"targets: local context build p50 <= 30 ms (got {figures['local_context_build_ms_p50']}); global wall "
        f"<= 1.3 x (map + reduce) (got {figures['global_wall_over_map_plus_reduce']} x)"
    )


if __name__ == "__main__":
    main()
