"""Joining Ray - without importing it in a process that runs everything itself - and choosing a
backend for a job."""

from __future__ import annotations

import logging
import os
import sys

BACKENDS = ("local", "ray")


def ray_running() -> bool:
    """Ray is initialised in this process (never imported: not initialised either)."""
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


def ensure_ray(verbose: bool = False) -> None:
    import ray

    if not ray.is_initialized():
        # no address: a submitted job joins its cluster, a plain local run starts one
        ray.init(include_dashboard=False, log_to_driver=verbose,
                 logging_level=logging.INFO if verbose else logging.ERROR)


def choose_backend(setting: str, input_bytes: int = 0, local_max_input_mb: float = float("inf")) -> str:
    """`auto`: Ray when there is a cluster to join (a submitted job, RAY_ADDRESS, Ray already running here) or
    the input is big enough to pay for Ray's start-up (seconds) with parallel actors; in this process otherwise."""
    if setting != "auto":
        return setting
    if ray_running() or os.environ.get("RAY_ADDRESS"):
        return "ray"
    return "ray" if input_bytes > local_max_input_mb * 2**20 else "local"


def job_limiter(backend: str, job_name: str, verbose: bool = False):
    """The one rate limiter of a job: a named Ray actor every worker on every node reserves from, or the same
    buckets in this process."""
    from graphrag_ray.llm.ratelimit import LocalRateLimiter, RayRateLimiter

    if backend != "ray":
        return LocalRateLimiter()
    ensure_ray(verbose)
    return RayRateLimiter.for_job(job_name)
