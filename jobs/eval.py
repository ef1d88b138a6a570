"""Ray job entrypoint for bulk evaluation.

ray job submit --working-dir . -- python jobs/eval.py --root /shared/project --generate 200 --methods local,global
"""

from __future__ import annotations

import argparse
import sys

from graphrag_ray import api
from graphrag_ray.errors import GraphRagRayError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="graphrag-ray eval job")
    parser.add_argument("--root", required=True)
    parser.add_argument("--config", default=None)
    parser.add_argument("--questions", default=None, help="csv/jsonl question file")
    parser.add_argument("--generate", type=int, default=None, help="make N questions from the index")
    parser.add_argument("--methods", default="local,global")
    parser.add_argument("--no-judge", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    try:
        api.join_ray()
        result = api.evaluate(
            args.root, args.config, args.questions, args.generate, args.methods.split(","), not args.no_judge, args.out
        )
    except GraphRagRayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(result.report.read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
