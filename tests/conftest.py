from __future__ import annotations

import os

import pytest

from graphrag_ray.simulate.process import SimulatorProcess


@pytest.fixture(scope="session")
def simulator():
    """A fault-free simulator, shared by the session (tests reset its counters when they compare)."""
    with SimulatorProcess() as sim:
        yield sim


@pytest.fixture(scope="session")
def ray_session():
    """Ray is started once per test session, with few CPUs (2-core machines)."""
    import ray

    from graphrag_ray.exec.runtime import start_ray

    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    if not ray.is_initialized():
        # "local": always a fresh instance of our own (on loopback, as a command's), never a cluster some other
        # process left running
        start_ray("local", num_cpus=2)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def no_key():
    """No GRAPHRAG_API_KEY in the environment: the examples' promise of running with no key."""
    saved = os.environ.pop("GRAPHRAG_API_KEY", None)
    yield
    if saved is not None:
        os.environ["GRAPHRAG_API_KEY"] = saved
