"""Benchmark: the `graphrag-ray query` command's wall time, start-up included, on the coffee-shop index.

Indexes examples/coffee_shop with the standard method against the simulator (zero latency), then runs
`graphrag-ray query --method local` and `--method global` as a user would (a new process each time) and prints the
median wall of --repeats runs, with the engine time the command itself reports: once asking the same question again
(its answer comes from the cache, as in a re-run) and once asking a new question each time (every call is made).
What a short command spends is mostly Python start-up (imports), so this is the figure that shows it.

    python jobs/bench_query_command.py --repeats 5
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from graphrag_ray.simulate.process import SimulatorProcess

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent / "examples" / "coffee_shop" / "input"
QUESTIONS = {"local": "李明在经营咖啡店过程中都经历了哪些挑战？", "global": "这家咖啡店的主要经营主题是什么？"}


def settings_for(base_url: str) -> dict:
    model = {"api_base": base_url, "api_key": "${GRAPHRAG_API_KEY}", "stream_requests": "never"}
    return {
        "models": {
            "default_chat": {**model, "model": "gpt-4o-mini"},
            "default_embedding": {**model, "type": "embedding", "model": "text-embedding-3-small"},
        }
    }


def command() -> list[str]:
    """The installed console command of this interpreter's environment."""
    installed = Path(sys.executable).with_name("graphrag-ray")
    return [str(installed)] if installed.exists() else [sys.executable, "-m", "graphrag_ray.cli"]


def timed(args: list[str], env: dict) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command() + args, env=env, capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args[:3])} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return wall, done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-query-command-"))
    env = {**os.environ, "GRAPHRAG_API_KEY": "bench-key"}
    env.pop("RAY_ADDRESS", None)
    try:
        shutil.copytree(CORPUS, work / "input")
        with SimulatorProcess() as sim:
            (work / "settings.yaml").write_text(yaml.safe_dump(settings_for(sim.base_url)), encoding="utf-8")
            index_wall, _ = timed(["index", "--root", str(work)], env)
            print(f"index command (coffee shop, standard): {index_wall:.2f} s")
            print(f"{'method':<8}{'question':<10}{'median s':>10}{'min s':>8}{'max s':>8}{'engine s':>10}")
            for method, question in QUESTIONS.items():
                for kind in ("repeated", "new"):
                    walls, engine = [], []
                    for n in range(args.repeats):
                        asked = question if kind == "repeated" else f"{question} ({kind} {n})"
                        wall, stderr = timed(["query", "--root", str(work), "--method", method, asked], env)
                        walls.append(wall)
                        found = re.search(r"\] ([0-9.]+)s,", stderr)
                        engine.append(float(found.group(1)) if found else float("nan"))
                    print(
                        f"{method:<8}{kind:<10}{statistics.median(walls):>10.2f}{min(walls):>8.2f}"
                        f"{max(walls):>8.2f}{statistics.median(engine):>10.2f}"
                    )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
