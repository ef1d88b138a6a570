"""Benchmark: one job-wide rate limiter shared by several Ray worker actors.

4 actors x 16 concurrent requests against the simulator enforcing TPM and RPM; prints the 429s received
(target 0) and the steady-state token throughput as a fraction of the TPM limit (target >= 0.90).

    python jobs/bench_limiter.py --duration 120 --actors 4 --concurrency 16 --tpm 60000 --rpm 600
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import ray

from graphrag_ray.config.settings import ModelConfig, RateLimitConfig
from graphrag_ray.llm.cache import ResponseCache
from graphrag_ray.llm.ledger import UsageLedger
from graphrag_ray.llm.model import ChatModel
from graphrag_ray.llm.ratelimit import RayRateLimiter
from graphrag_ray.simulate.process import SimulatorProcess

FILLER = (
    "The coffee shop in Hangzhou sells lattes and americanos; the manager suggested member discounts. "
    "Beans arrive monthly from a supplier in Yunnan, milk daily from a local dairy. "
)


@ray.remote(num_cpus=0)
class LoadWorker:
    def __init__(self, config: dict, limiter: RayRateLimiter, worker_id: int):
        self.model = ChatModel(
            "bench",
            ModelConfig.model_validate(config),
            cache=ResponseCache(None),
            limiter=limiter,
            ledger=UsageLedger(),
        )
        self.worker_id = worker_id

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()

    async def run(self, duration: float, concurrency: int) -> dict:
        done: list[tuple[float, int]] = []
        deadline = time.time() + duration
        counter = iter(range(10**9))

        async def loop():
            while time.time() < deadline:
                n = next(counter)
                prompt = f"{FILLER * 2}\nRequest {self.worker_id}-{n}: which supplier sends the beans?"
                result = await self.model.chat(
                    [{"role": "user", "content": prompt}], stage="bench", max_tokens=120, use_cache=False
                )
                done.append((time.time(), result.prompt_tokens + result.completion_tokens))

        await asyncio.gather(*(loop() for _ in range(concurrency)))
        return {"done": done, "ledger": self.model.ledger.to_dict()}


def run_benchmark(
    duration: float, actors: int, concurrency: int, tpm: int, rpm: int, latency: float, warmup: float
) -> dict:
    with SimulatorProcess(tpm=tpm, rpm=rpm, latency=latency) as sim:
        config = ModelConfig(
            api_base=sim.base_url,
            api_key="sim-key",
            model="gpt-4o-mini",
            concurrency=concurrency,
            request_timeout=30,
            stream_requests="never",  # the simulator stands for a hosted provider
            rate_limit=RateLimitConfig(rpm=rpm, tpm=tpm),
        ).model_dump(mode="json")
        config["api_key"] = "sim-key"
        limiter = RayRateLimiter.for_job(f"bench-{time.time_ns()}")
        workers = [LoadWorker.remote(config, limiter, i) for i in range(actors)]
        ray.get([w.node_id.remote() for w in workers])  # actors up before the clock starts
        try:
            start = time.time()
            results = ray.get([w.run.remote(duration, concurrency) for w in workers])
            end = time.time()
            server = sim.stats()
        finally:  # ended here, not left to the cluster's teardown (one was seen alive after the benchmark, orphaned)
            for worker in workers:
                ray.kill(worker)
    ledger = UsageLedger()
    for r in results:
        ledger.merge(r["ledger"])
    window = [(t, n) for r in results for t, n in r["done"] if t >= start + warmup]
    steady_tokens = sum(n for _, n in window)
    steady_seconds = end - (start + warmup)
    utilisation = steady_tokens / steady_seconds / (tpm / 60.0)
    total = ledger.total()
    return {
        "duration_s": round(end - start, 1),
        "requests": total.calls,
        "tokens": total.prompt_tokens + total.completion_tokens,
        "429s_received": total.rate_limited,
        "server_429s": server.get("429_limit", 0),
        "steady_state_tokens_per_min": round(steady_tokens / steady_seconds * 60),
        "tpm_limit": tpm,
        "utilisation": round(utilisation, 3),
        "server_ok": server.get("ok", 0),
        "server_max_requests_60s": server.get("max_requests_60s"),
        "server_max_tokens_60s": server.get("max_tokens_60s"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=120)
    parser.add_argument("--actors", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--tpm", type=int, default=60_000)
    parser.add_argument("--rpm", type=int, default=600)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds excluded (the initial burst)")
    args = parser.parse_args()
    ray.init(include_dashboard=False, log_to_driver=False)
    try:
        figures = run_benchmark(
            args.duration, args.actors, args.concurrency, args.tpm, args.rpm, args.latency, args.warmup
        )
    finally:
        ray.shutdown()
    print(json.dumps(figures, indent=2))
    print(
        f"429s received: {figures['429s_received']} (target 0); "
        f"steady-state utilisation: {figures['utilisation']:.3f} of TPM (target >= 0.90)"
    )


if __name__ == "__main__":
    main()
