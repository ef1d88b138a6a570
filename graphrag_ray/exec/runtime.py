"""Joining Ray - without importing it in a process that runs everything itself - and choosing a
backend for a job."""

from __future__ import annotations

import logging
import os
import socket
import sys

BACKENDS = ("local", "ray")


def ray_running() -> bool:
    """Ray is initialised in this process (never imported: not initialised either)."""
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


def _answers(address: str, timeout: float = 1.0) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def ray_address(temp_dir: str | None = None) -> str | None:
    """The address for `ray.init`: None lets Ray join what RAY_ADDRESS names (a submitted job) or the cluster
    `ray start` recorded in its temp dir; "local" starts one here when that record names a cluster that is gone.
    Ray itself would wait on a dead record forever (it is left behind when a `ray start` head or a test
    cluster dies without `ray stop`)."""
    if os.environ.get("RAY_ADDRESS"):
        return None
    from ray._common.utils import get_ray_address_file

    record = get_ray_address_file(temp_dir)
    try:
        recorded = open(record, encoding="utf-8").read().strip()
    except OSError:
        return None
    if recorded and _answers(recorded):
        return None
    logging.getLogger(__name__).warning("ignoring %s: the Ray cluster it names (%s) does not answer; "
                                        "starting one in this process", record, recorded or "nothing")
    return "local"


def ensure_ray(verbose: bool = False) -> None:
    import ray

    if not ray.is_initialized():
        ray.init(address=ray_address(), include_dashboard=False, log_to_driver=verbose,
                 logging_level=logging.INFO if verbose else logging.ERROR)


def choose_backend(setting: str, input_bytes: int = 0, local_max_input_mb: float = float("inf"),
                   join_cluster: bool = True) -> str:
    """`auto`: Ray when there is a cluster to join (a submitted job, RAY_ADDRESS, Ray already running here) or
    the input is big enough to pay for Ray's start-up (seconds) with parallel actors; in this process otherwise.
    With `join_cluster` false (an update of a few documents), a cluster is not reason enough: the actors' start-up
    (about a second) is most of what the job would wait on."""
    if setting != "auto":
        return setting
    if join_cluster and (ray_running() or os.environ.get("RAY_ADDRESS")):
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
