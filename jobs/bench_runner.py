"""Runs one command of either engine inside its own interpreter, timing the parts a side-by-side benchmark
compares; used by bench_vs_graphrag.py, never imported by the package.

    <python> jobs/bench_runner.py --side ours|theirs --timings T.json [--no-tracemalloc] -- <cli args>

Self-contained on purpose: Microsoft GraphRAG's interpreter runs it too (its venv has no graphrag_ray).
It wraps, without changing them:
  * the local-search context builder (ours: LocalSearch.build_context, theirs: LocalSearchMixedContext.build_context)
  * the global search (ours: GlobalSearch.search, theirs: graphrag.api.global_search - both given loaded tables)
and writes their durations to T.json. `--no-tracemalloc` makes `tracemalloc.start` a no-op, which switches off
Microsoft GraphRAG's always-on per-workflow memory profiler (graphrag/index/run/profiling.py) and nothing else.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
import tracemalloc

TIMINGS: dict[str, list[float]] = {}


def _record(name: str, started: float) -> None:
    TIMINGS.setdefault(name, []).append(time.perf_counter() - started)


def _wrap_sync(owner, attr: str, name: str) -> None:
    original = getattr(owner, attr)

    @functools.wraps(original)
    def timed(*args, **kwargs):
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            _record(name, started)

    setattr(owner, attr, timed)


def _wrap_async(owner, attr: str, name: str) -> None:
    original = getattr(owner, attr)

    @functools.wraps(original)
    async def timed(*args, **kwargs):
        started = time.perf_counter()
        try:
            return await original(*args, **kwargs)
        finally:
            _record(name, started)

    setattr(owner, attr, timed)


def _instrument_ours() -> None:
    from graphrag_ray.query.global_search import GlobalSearch
    from graphrag_ray.query.local import LocalSearch

    _wrap_async(LocalSearch, "build_context", "local_context_s")
    _wrap_async(GlobalSearch, "search", "global_search_s")


def _instrument_theirs() -> None:
    import graphrag.api as api
    from graphrag.query.structured_search.local_search.mixed_context import LocalSearchMixedContext

    _wrap_sync(LocalSearchMixedContext, "build_context", "local_context_s")
    _wrap_async(api, "global_search", "global_search_s")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--side", choices=["ours", "theirs"], required=True)
    parser.add_argument("--timings", required=True)
    parser.add_argument("--no-tracemalloc", action="store_true")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    opts = parser.parse_args()
    args = opts.args[1:] if opts.args[:1] == ["--"] else opts.args
    if opts.no_tracemalloc:
        tracemalloc.start = lambda *a, **k: None  # noqa: E731 - get_traced_memory then reports (0, 0)
    code = 0
    try:
        if opts.side == "ours":
            _instrument_ours()
            from graphrag_ray.cli import main as cli

            sys.argv = ["graphrag-ray", *args]
            code = cli() or 0
        else:
            _instrument_theirs()
            from graphrag.cli.main import app

            app(args=args, prog_name="graphrag", standalone_mode=False)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        with open(opts.timings, "w", encoding="utf-8") as handle:
            json.dump(TIMINGS, handle)
    if opts.side == "ours":  # leave the way the installed command does
        from graphrag_ray.cli import exit_now

        exit_now(code)
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
