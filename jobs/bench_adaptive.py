"""Benchmark: indexing against a provider whose real limits the user did not configure.

The simulator counts requests and tokens over a sliding 60-s window, as providers do, announces its limits in
OpenAI's `x-ratelimit-*` headers and answers 429 + Retry-After beyond them. Scenarios (issue 14's acceptance):

  learn    server TPM 15,000 / RPM 150, client with no limits configured
  halve    the same, with the server's limits halved 60 s into the run
  match    client configured TPM 60,000 = the server's: no 429 and no 60-s window above 60,000 tokens

Prints, per scenario: wall, failures, requests, server 429s (and their share of requests), total tokens, the
most tokens the server admitted in any 60 s, and wall / (total tokens / TPM per minute) - 1.0 is the best a
client can do.

    python jobs/bench_adaptive.py --tokens 20000 --scenario all
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import fresh_project  # noqa: E402

from graphrag_ray.api import build_index  # noqa: E402
from graphrag_ray.simulate.process import SimulatorProcess  # noqa: E402

SCENARIOS = {
    "learn": {"server": {"rpm": 150, "tpm": 15_000}, "client": {}},
    "halve": {"server": {"rpm": 150, "tpm": 15_000, "limits_after": "60=75/7500"}, "client": {}},
    "match": {"server": {"rpm": 600, "tpm": 60_000}, "client": {"rpm": 600, "tpm": 60_000}},
}


def settings_for(base_url: str, limits: dict) -> dict:
    model = {
        "api_base": base_url,
        "api_key": "bench-key",
        "request_timeout": 60,
        "concurrency": 16,
        **({"rate_limit": limits} if limits else {}),
    }
    return {
        "models": {
            "default_chat": {**model, "model": "gpt-4o-mini"},
            "default_embedding": {**model, "type": "embedding", "model": "text-embedding-3-small"},
        },
        "workers": {"executor": "local", "num_actors": 2, "partition_size": 8},
    }


def run_scenario(name: str, corpus: Path, work: Path, latency: float) -> dict:
    spec = SCENARIOS[name]
    root = work / name
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(corpus, root / "input")
    with SimulatorProcess(latency=latency, **spec["server"]) as sim:
        (root / "settings.yaml").write_text(yaml.safe_dump(settings_for(sim.base_url, spec["client"])))
        started = time.perf_counter()
        result = build_index(root=root)
        wall = time.perf_counter() - started
        served = sim.stats()
    tokens = served.get("prompt_tokens", 0) + served.get("completion_tokens", 0)
    per_second = {int(k): v for k, v in served.get("tokens_per_second", {}).items()}
    minutes = [
        sum(per_second.get(s, 0) for s in range(m * 60, m * 60 + 60))
        for m in range(max(per_second, default=0) // 60 + 1)
    ]
    requests = served.get("ok", 0) + served.get("429_limit", 0)
    tpm = spec["server"]["tpm"]
    return {
        "scenario": name,
        "wall_s": round(wall, 1),
        "failures": result.stats["total"]["failures"],
        "requests": requests,
        "server_429s": served.get("429_limit", 0),
        "429_share": round(served.get("429_limit", 0) / max(1, requests), 4),
        "client_429s": result.stats["total"]["rate_limited"],
        "total_tokens": tokens,
        "max_tokens_in_60s": served.get("max_tokens_60s", 0),
        "server_tpm": tpm,
        "wall_over_token_bound": round(wall / (tokens / tpm * 60), 3) if tokens else None,
        "tokens_per_minute": minutes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--scenario", default="all", choices=[*SCENARIOS, "all"])
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    corpus_root, corpus_tokens = fresh_project(args.workdir, args.tokens, "bench-adaptive-")
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    print(f"corpus: {corpus_tokens:,} tokens")
    print(
        f"{'scenario':<8}{'wall s':>9}{'failures':>9}{'requests':>9}{'429s':>7}{'429 %':>7}{'tokens':>10}"
        f"{'max 60s':>9}{'TPM':>8}{'wall/bound':>11}"
    )
    for name in names:
        row = run_scenario(name, corpus_root / "input", corpus_root.parent / f"{corpus_root.name}-runs", args.latency)
        print(
            f"{name:<8}{row['wall_s']:>9.1f}{row['failures']:>9}{row['requests']:>9}{row['server_429s']:>7}"
            f"{100 * row['429_share']:>6.1f}%{row['total_tokens']:>10,}{row['max_tokens_in_60s']:>9,}"
            f"{row['server_tpm']:>8,}{row['wall_over_token_bound']:>11}",
            flush=True,
        )
        print(
            "  tokens the server admitted per minute of the run: "
            + " ".join(f"{t:,}" for t in row["tokens_per_minute"])
        )
        print(json.dumps(row))


if __name__ == "__main__":
    main()
