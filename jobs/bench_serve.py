"""Benchmark: `graphrag-ray serve` under load, beside the same questions through the CLI.

The simulator answers each chat call in --latency seconds (embeddings in 0.05 s, as real embedding endpoints do);
--clients concurrent OpenAI-SDK clients ask local, global and basic questions in turn for --seconds per phase.
Phases: latency (1 replica taking every client at once); scaling (1, then 2 replicas, each taking
--replica-concurrency questions at once, the rest queued); TPM-bound (2 replicas under a TPM limit below what they
reached, the simulator enforcing the same limit server-side: any 429 it sends is counted). The response cache is off, so every
question costs its model calls. Prints p50 / p95 latency per method, queries per second, errors, the simulator's
429s and the memory of each replica process; then the CLI, one process per question.

Goals (issue 35): 0 errors; local p50 <= latency + 0.3 s; global p50 <= its sequential model rounds (map, reduce:
2) x latency + 0.5 s; throughput grows with replicas until the TPM binds, then holds it with 0 x 429.

    python jobs/bench_serve.py --clients 64 --seconds 120 --latency 1.0
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import openai
import psutil
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from graphrag_ray import api  # noqa: E402
from graphrag_ray.simulate.process import SimulatorProcess  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "lighthouse.csv"
QUESTIONS = {
    "local": [
        "Who is Ada Marsh?",
        "What did Tom Marsh do?",
        "Who made the Fresnel lens?",
        "What happened to the Northern Star?",
        "What is in the Port Winter Maritime Museum?",
    ],
    "global": [
        "What are the main events at the Gull Island Lighthouse?",
        "How did the lamp of the lighthouse change?",
        "What is the history of Port Winter harbour?",
    ],
    "basic": [
        "When was the electric lamp installed?",
        "Where is the Fresnel lens now?",
        "How many sailors were brought ashore in 1923?",
    ],
}
ROUNDS = {"local": 1, "global": 2, "basic": 1}  # sequential model rounds per method


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def project(folder: Path, base_url: str) -> Path:
    root = folder / "lighthouse"
    (root / "input").mkdir(parents=True)
    shutil.copy(CORPUS, root / "input" / "lighthouse.csv")
    settings = {
        "models": {
            "default_chat": {
                "api_base": base_url,
                "api_key": "${GRAPHRAG_API_KEY}",
                "model": "gpt-4o-mini",
                "request_timeout": 60,
                "max_tokens": 800,
            },
            "default_embedding": {
                "type": "embedding",
                "api_base": base_url,
                "api_key": "${GRAPHRAG_API_KEY}",
                "model": "text-embedding-3-small",
                "request_timeout": 60,
            },
        }
    }
    (root / "settings.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
    (root / ".env").write_text("GRAPHRAG_API_KEY=bench\n", encoding="utf-8")
    return root


def configure(root: Path, base_url: str, replicas: int, tpm: int | None, concurrency: int = 128) -> None:
    settings = yaml.safe_load((root / "settings.yaml").read_text(encoding="utf-8"))
    for model in settings["models"].values():
        model["api_base"] = base_url
        model["rate_limit"] = {"tpm": tpm} if tpm else {}
    settings["cache"] = {"enabled": False}  # every question pays its calls, as distinct users' questions do
    settings["serve"] = {
        "replicas": replicas,
        "replica_cpus": 0.25,
        "max_ongoing_requests": concurrency,
        "max_queued_requests": 512,
    }
    (root / "settings.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")


def replica_memory() -> list[float]:
    """Resident GB of each index replica's process (Ray titles them ray::ServeReplica:<app>:<deployment>)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        line = " ".join(proc.info["cmdline"] or [])
        if "ServeReplica:graphrag:index-" in line:
            found.append(proc.memory_info().rss / 2**30)
    return sorted(found)


async def load(url: str, clients: int, seconds: float) -> tuple[dict[str, list[float]], list[str], float]:
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=120)
    latencies: dict[str, list[float]] = {m: [] for m in QUESTIONS}
    errors: list[str] = []
    methods = list(QUESTIONS)
    end = time.monotonic() + seconds

    async def one_client(n: int) -> None:
        i = n
        while time.monotonic() < end:
            method = methods[i % len(methods)]
            # each user's question its own: the same request in flight twice is sent once (llm/model.py)
            question = QUESTIONS[method][(i // len(methods)) % len(QUESTIONS[method])] + f" (user {n}, #{i})"
            started = time.monotonic()
            try:
                reply = await client.chat.completions.create(
                    model=f"lighthouse/{method}", messages=[{"role": "user", "content": question}]
                )
                if not reply.choices[0].message.content:
                    errors.append(f"{method}: empty answer")
                latencies[method].append(time.monotonic() - started)
            except Exception as exc:  # noqa: BLE001 - counted and printed
                errors.append(f"{method}: {type(exc).__name__}: {str(exc)[:120]}")
            i += 1

    began = time.monotonic()
    await asyncio.gather(*(one_client(n) for n in range(clients)))
    await client.close()
    return latencies, errors, time.monotonic() - began


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else (values[0] if values else float("nan"))


def phase(
    name: str, root: Path, sim: SimulatorProcess, replicas: int, tpm: int | None, args, concurrency: int = 128
) -> dict:
    from ray import serve

    from graphrag_ray.serve.deploy import build_app, stop_server

    configure(root, sim.base_url, replicas, tpm, concurrency)
    serve.run(build_app({"roots": [str(root)]}), name="graphrag", route_prefix="/")
    before = sim.stats()
    latencies, errors, wall = asyncio.run(load(args.url, args.clients, args.seconds))
    after = sim.stats()
    memory = replica_memory()
    stop_server()
    done = sum(len(v) for v in latencies.values())
    limited = after.get("429_limit", 0) - before.get("429_limit", 0)
    tokens = (
        after.get("prompt_tokens", 0)
        + after.get("completion_tokens", 0)
        - before.get("prompt_tokens", 0)
        - before.get("completion_tokens", 0)
    )
    print(
        f"\n{name}: {replicas} replica(s) x {concurrency} questions at once, tpm {tpm or 'unlimited'}, "
        f"{args.clients} clients, {wall:.0f} s"
    )
    for method, values in latencies.items():
        goal = ROUNDS[method] * args.latency + (0.3 if method != "global" else 0.5)
        print(
            f"  {method:7s} n={len(values):5d}  p50 {pct(values, 50):6.2f} s  p95 {pct(values, 95):6.2f} s  "
            f"(goal p50 <= {goal:.1f} s)"
        )
    calls = {k[5:]: after.get(k, 0) - before.get(k, 0) for k in after if k.startswith("kind_")}
    print(
        "  model calls: "
        + ", ".join(f"{kind} {n:,}" for kind, n in sorted(calls.items()) if n)
        + f" ({sum(calls.values()) / max(done, 1):.2f} per question)"
    )
    print(
        f"  {done / wall:.1f} queries/s, {tokens / wall * 60:,.0f} tokens/min, errors {len(errors)}, "
        f"simulator 429s {limited}, replica memory " + ", ".join(f"{gb:.2f} GB" for gb in memory)
    )
    for line in sorted(set(errors))[:5]:
        print("    error:", line)
    return {"qps": done / wall, "tpm": tokens / wall * 60}


def cli_baseline(root: Path, sim: SimulatorProcess, per_method: int) -> None:
    configure(root, sim.base_url, 1, None)
    print(f"\nCLI, one process per question ({per_method} per method, one after another):")
    for method in QUESTIONS:
        walls = []
        for question in QUESTIONS[method][:per_method]:
            started = time.monotonic()
            done = subprocess.run(
                [sys.executable, "-m", "graphrag_ray.cli", "query", "--root", str(root), "--method", method, question],
                capture_output=True,
                text=True,
                timeout=300,
            )
            walls.append(time.monotonic() - started)
            if done.returncode:
                print("    error:", done.stderr.strip().splitlines()[-1:])
        print(f"  {method:7s} p50 {statistics.median(walls):6.2f} s  (each a new process)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument(
        "--tpm-share",
        type=float,
        default=0.6,
        help="the TPM phase's limit, as a share of what 2 replicas reached unlimited",
    )
    parser.add_argument("--cli-questions", type=int, default=3)
    parser.add_argument(
        "--replica-concurrency",
        type=int,
        default=16,
        help="serve.max_ongoing_requests in the "
        "scaling and TPM phases: what one replica takes at once, so replicas are the capacity",
    )
    args = parser.parse_args()

    import ray
    from ray import serve

    work = Path(tempfile.mkdtemp(prefix="bench_serve_"))
    with SimulatorProcess() as quick:
        root = project(work, quick.base_url)
        api.build_index(root=root)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    port = free_port()
    args.url = f"http://127.0.0.1:{port}"
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    print(
        f"simulator latency {args.latency} s per chat call, 0.05 s per embedding; machine: {psutil.cpu_count()} cores"
    )
    width = args.replica_concurrency
    with SimulatorProcess(latency=args.latency, embedding_latency=0.05) as sim:
        phase("latency (every client served at once)", root, sim, 1, None, args)
        one = phase("scaling", root, sim, 1, None, args, width)
        two = phase("scaling", root, sim, 2, None, args, width)
        limit = int(two["tpm"] * args.tpm_share)
    with SimulatorProcess(latency=args.latency, embedding_latency=0.05, tpm=limit) as sim:
        bound = phase("TPM-bound", root, sim, 2, limit, args, width)
        print(
            f"\nthroughput at {width} questions per replica: 1 replica {one['qps']:.1f} q/s, 2 replicas "
            f"{two['qps']:.1f} q/s; 2 replicas under tpm {limit:,} ({args.tpm_share:.0%} of theirs): "
            f"{bound['qps']:.1f} q/s, {bound['tpm']:,.0f} tokens/min ({bound['tpm'] / limit:.0%} of the limit)"
        )
        cli_baseline(root, sim, args.cli_questions)
    serve.shutdown()
    ray.shutdown()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
