"""Joining Ray - without importing it in a process that runs everything itself - and choosing a
backend for a job."""

from __future__ import annotations

import logging
import os
import socket
import sys

BACKENDS = ("local", "ray")
log = logging.getLogger(__name__)


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


def ray_address(temp_dir: str | None = None, join_recorded: bool = False) -> str | None:
    """The address for `ray.init`: None lets Ray join what RAY_ADDRESS names (a submitted job, or a cluster
    named on purpose); otherwise "local", a cluster of this process's own.

    A cluster `ray start` recorded on this machine is joined only with `join_recorded` (`serve`, whose
    deployments belong on the cluster it is started beside): a plain run does not become a job on a cluster
    nobody named - on a shared machine that was another user's, and its teardown killed the run. A record
    naming a cluster that is gone is never followed (Ray would wait on it forever)."""
    if os.environ.get("RAY_ADDRESS"):
        return None
    from ray._common.utils import get_ray_address_file

    record = get_ray_address_file(temp_dir)
    try:
        recorded = open(record, encoding="utf-8").read().strip()
    except OSError:
        return "local"
    if recorded and _answers(recorded):
        if join_recorded:
            return None
        log.warning(
            "not joining the Ray cluster at %s (recorded by `ray start` in %s): a run joins a cluster only "
            "when RAY_ADDRESS names it (RAY_ADDRESS=%s, as `ray job submit` sets it); starting one of "
            "its own",
            recorded,
            record,
            recorded,
        )
    return "local"


# how this process's Ray came up: "started" (a cluster of its own) or "joined"; unset: its caller initialised it
_HOW: dict[str, str] = {}


def where_ray_runs() -> str:
    """One line naming the Ray cluster this process is on: its address, live nodes and CPUs, and whether this
    process started it or joined it."""
    import ray

    address = ray.get_runtime_context().gcs_address
    nodes = sum(1 for node in ray.nodes() if node.get("Alive"))
    cpus = ray.cluster_resources().get("CPU", 0)
    shape = f"{nodes} node{'s' if nodes != 1 else ''}, {cpus:g} CPUs"
    how = _HOW.get("how")
    if how == "started":
        return f"Ray: started a local cluster at {address} ({shape})"
    if how == "joined":
        return f"Ray: joined the cluster at {address} ({shape})"
    return f"Ray: on the cluster this process is connected to at {address} ({shape})"


def ensure_ray(verbose: bool = False, join_recorded: bool = False) -> None:
    import ray

    if not ray.is_initialized():
        address = ray_address(join_recorded=join_recorded)
        ray.init(
            address=address,
            include_dashboard=False,
            log_to_driver=verbose,
            logging_level=logging.INFO if verbose else logging.ERROR,
        )
        _HOW["how"] = "started" if address == "local" else "joined"


def choose_backend(
    setting: str, input_bytes: int = 0, local_max_input_mb: float = float("inf"), join_cluster: bool = True
) -> str:
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
