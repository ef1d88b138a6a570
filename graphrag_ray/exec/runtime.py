"""Joining Ray - without importing it in a process that runs everything itself - and choosing a
backend for a job."""

from __future__ import annotations

import logging
import os
import socket
import sys

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


def ray_address(temp_dir: str | None = None, address: str | None = None) -> str | None:
    """The address for `ray.init`: the one a command was given (`--address`); None lets Ray join what RAY_ADDRESS
    names (a submitted job, or a cluster named on purpose); otherwise "local", a cluster of this process's own.

    A cluster `ray start` merely recorded on this machine is never joined: on a shared machine that was another
    user's - their replicas, their environment, their teardown killing the run. A record naming a live cluster is
    said once, with how to join it on purpose."""
    if address:
        return address
    if os.environ.get("RAY_ADDRESS"):
        return None
    from ray._common.utils import get_ray_address_file

    record = get_ray_address_file(temp_dir)
    try:
        recorded = open(record, encoding="utf-8").read().strip()
    except OSError:
        return "local"
    if recorded and _answers(recorded):
        log.warning(
            "not joining the Ray cluster at %s (recorded by `ray start` in %s): a command joins a cluster only "
            "when RAY_ADDRESS (as `ray job submit` sets it) or --address names it; starting one of its own",
            recorded,
            record,
        )
    return "local"


def loopback_only() -> None:
    """A cluster this process starts for itself listens on loopback only. Ray's ports (GCS, raylet, workers,
    object manager, agents) have no authentication beyond a token and Ray's guidance is that only trusted hosts
    reach them; by default Ray binds them on every interface. Ray's own single-machine mode (the one it uses on
    macOS and Windows) takes 127.0.0.1 as the node's address, and every server binds that: set for this process
    and the Ray processes it starts (they inherit the environment)."""
    from ray._private import ray_constants

    os.environ[ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False  # read at import; ray may already be imported


def on_loopback_cluster() -> bool:
    """This process belongs to a cluster started by `loopback_only` (its environment says so: Ray's processes
    inherit it)."""
    return os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER") == "0"


def serve_replicas_on_loopback() -> None:
    """On a loopback-only cluster, a Ray Serve replica's inter-deployment gRPC server binds 127.0.0.1 as every
    other server there does; Ray Serve writes `[::]:0` (every interface) for it. Called where a replica imports
    our deployments, before the replica starts that server."""
    if not on_loopback_cluster():
        return
    from ray.serve._private import replica

    bind = replica.add_port_to_grpc_server
    if getattr(bind, "on_loopback", False):
        return

    def on_loopback(server, address: str):
        return bind(server, address.replace("[::]:", "127.0.0.1:", 1))

    on_loopback.on_loopback = True
    replica.add_port_to_grpc_server = on_loopback


def start_ray(address: str | None, verbose: bool = False, **kwargs) -> None:
    """`ray.init` at `address` ("local": a cluster of this process's own, on loopback only)."""
    import ray

    if address == "local":
        loopback_only()
    ray.init(
        address=address,
        include_dashboard=False,
        log_to_driver=verbose,
        logging_level=logging.INFO if verbose else logging.ERROR,
        **kwargs,
    )
    _HOW["how"] = "started" if address == "local" else "joined"


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


def ensure_ray(verbose: bool = False, address: str | None = None) -> None:
    """Ray initialised in this process: the cluster `address` (or RAY_ADDRESS) names, or one of its own."""
    import ray

    if not ray.is_initialized():
        start_ray(ray_address(address=address), verbose)


def choose_backend(
    setting: str,
    input_bytes: int = 0,
    local_max_input_mb: float = float("inf"),
    join_cluster: bool = True,
    ray_min_cpus: int = 1,
) -> str:
    """`auto`: Ray when there is a cluster to join (a submitted job, RAY_ADDRESS, Ray already running here), or
    when Ray started here would buy parallel parsing - this machine has `ray_min_cpus` CPUs and the input is big
    enough to pay for Ray's start-up (seconds); in this process otherwise. With `join_cluster` false (an update of
    a few documents), a cluster is not reason enough: the actors' start-up (about a second) is most of what the job
    would wait on."""
    if setting != "auto":
        return setting
    if join_cluster and (ray_running() or os.environ.get("RAY_ADDRESS")):
        return "ray"
    big = input_bytes > local_max_input_mb * 2**20
    return "ray" if big and (os.cpu_count() or 1) >= ray_min_cpus else "local"


def job_limiter(backend: str, job_name: str, verbose: bool = False):
    """The one rate limiter of a job: a named Ray actor every worker on every node reserves from, or the same
    buckets in this process."""
    from graphrag_ray.llm.ratelimit import LocalRateLimiter, RayRateLimiter

    if backend != "ray":
        return LocalRateLimiter()
    ensure_ray(verbose)
    return RayRateLimiter.for_job(job_name)
