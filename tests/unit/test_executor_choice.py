"""`workers.executor: auto` chooses from what Ray would buy: a cluster to join, or parsing one process cannot do
in time on this machine's CPUs - not from the input's size alone."""

from __future__ import annotations

from graphrag_ray.exec import runtime
from graphrag_ray.exec.runtime import choose_backend

MB = 2**20


def test_auto_starts_ray_for_a_big_input_only_on_a_machine_with_the_cpus_for_it(monkeypatch):
    monkeypatch.setattr(runtime, "ray_running", lambda: False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(runtime.os, "cpu_count", lambda: 2)
    assert choose_backend("auto", 5 * MB, 1.0, True, ray_min_cpus=4) == "local"  # 2 CPUs: Ray buys nothing
    monkeypatch.setattr(runtime.os, "cpu_count", lambda: 16)
    assert choose_backend("auto", 5 * MB, 1.0, True, ray_min_cpus=4) == "ray"
    assert choose_backend("auto", MB // 2, 1.0, True, ray_min_cpus=4) == "local"  # small: no start-up to pay
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    monkeypatch.setattr(runtime.os, "cpu_count", lambda: 2)
    assert choose_backend("auto", MB // 2, 1.0, True, ray_min_cpus=4) == "ray"  # a named cluster: joined
    assert choose_backend("auto", MB // 2, 1.0, False, ray_min_cpus=4) == "local"  # a small update stays here
