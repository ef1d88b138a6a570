"""Ray job entrypoint for indexing, updating an index, or retrying its failed items.

    ray job submit --working-dir . -- python jobs/index.py --root /shared/project
    ray job submit --working-dir . -- python jobs/index.py --root /shared/project --update

`ray.init()` is called with no address: a submitted job joins its cluster, a plain local run starts one.
Settings come from ROOT/settings.yaml with ${VAR}s filled from the job's environment (runtime_env env_vars or
the cluster's secrets), so no key ever travels in the working dir.
"""

from __future__ import annotations

import argparse
import json
import sys

from graphrag_ray import api
from graphrag_ray.errors import GraphRagRayError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="graphrag-ray index job")
    parser.add_argument("--root", required=True, help="project root (on shared storage for multi-node runs)")
    parser.add_argument("--config", default=None, help="settings file (default ROOT/settings.yaml)")
    parser.add_argument("--method", default="standard", choices=api.index_methods())
    parser.add_argument("--no-resume", action="store_true", help="start over instead of continuing")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--update", action="store_true", help="bring the published index up to date with the input")
    what.add_argument("--retry-failures", action="store_true", help="re-run the published index's failed items")
    args = parser.parse_args(argv)
    try:
        api.join_ray()
        if args.update:
            result = api.update_index(
                root=args.root, config_file=args.config, resume=not args.no_resume, announce=print
            )
        else:
            result = api.build_index(
                root=args.root,
                config_file=args.config,
                method=args.method,
                resume=not args.no_resume,
                retry_failures=args.retry_failures,
                announce=print,
            )
    except GraphRagRayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(
        json.dumps(
            {
                "output": str(result.output),
                "run_id": result.run_id,
                "kind": result.stats.get("kind"),
                "nothing_done": result.stats.get("nothing_done"),
                "rows": result.stats.get("rows"),
                "changes": result.stats.get("changes"),
                "total": result.stats.get("total"),
                "nodes": result.node_ids,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
