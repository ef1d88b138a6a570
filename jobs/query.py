"""Ray job entrypoint: a file of queries -> answers (Parquet), every (query, method) pair on Ray actors under
the job's rate limiter; re-running skips answered pairs.

    ray job submit --working-dir . -- python jobs/query.py --root /shared/project --questions q.jsonl --methods local
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from graphrag_ray import api
from graphrag_ray.errors import GraphRagRayError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="graphrag-ray batch query job")
    parser.add_argument("--root", required=True)
    parser.add_argument("--config", default=None)
    parser.add_argument("--questions", required=True, help="csv/jsonl with a 'question' column")
    parser.add_argument("--methods", default="local")
    parser.add_argument("--out", default=None, help="output folder (default ROOT/queries/<id>)")
    args = parser.parse_args(argv)
    try:
        out = args.out or str(Path(args.root) / "queries" / Path(args.questions).stem)
        api.join_ray()
        result = api.evaluate(
            args.root, args.config, args.questions, None, args.methods.split(","), judge=False, out=out
        )
    except GraphRagRayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"{result.answers.height} answers in {result.out / 'answers.parquet'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
