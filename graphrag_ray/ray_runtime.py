"""Joining Ray, for the index executor and for global search's map workers - without importing it (~0.3 s)
in a process that runs everything itself."""

from __future__ import annotations

import logging
import sys


def ray_running() -> bool:
    """Ray is initialised in this process (never imported: not initialised either)."""
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


def ensure_ray(verbose: bool = False) -> None:
    import ray

    if not ray.is_initialized():
        # no address: a submitted job joins its cluster, a plain local run starts one
        ray.init(include_dashboard=False, log_to_driver=verbose, logging_level=logging.INFO if verbose
                 else logging.ERROR)
