"""Multi-node runs on ray.cluster_utils.Cluster: work spreads over both worker nodes under one limiter, and
removing a worker node in the middle of extraction loses nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from graphrag_ray.simulate.process import SimulatorProcess
from graphrag_ray.storage.tables import read_table
from tests.helpers import make_root, published_index
from tests.integration.test_resume import copy_input, write_corpus

pytestmark = [pytest.mark.reliability, pytest.mark.slow]  # a Ray cluster of several nodes
DRIVER = Path(__file__).with_name("multinode_driver.py")
SECTIONS = dict(
    workers={"executor": "ray", "num_actors": 2, "partition_size": 2, "actor_cpus": 0.5},
    chunks={"size": 300, "overlap": 30},
)


def run_driver(root: Path, *extra: str) -> dict:
    out = subprocess.run([sys.executable, str(DRIVER), str(root), *extra], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_extraction_spreads_over_both_worker_nodes_under_one_limiter(tmp_path):
    write_corpus(tmp_path / "corpus", n_docs=8)
    with SimulatorProcess(latency=0.05, rpm=6000, tpm=2_000_000) as sim:
        root = make_root(tmp_path / "p", sim.base_url, **SECTIONS)
        settings = (root / "settings.yaml").read_text()
        (root / "settings.yaml").write_text(
            settings.replace("model: gpt-4o-mini", "model: gpt-4o-mini\n    rate_limit: {rpm: 3000, tpm: 1000000}")
        )
        copy_input(tmp_path / "corpus", root / "input")
        report = run_driver(root)
        served = sim.stats()
    used = set(report["partition_nodes"])
    assert set(report["worker_node_ids"]) <= used, "partitions ran on both worker nodes"
    assert served.get("429_limit", 0) == 0 and report["failures"] == 0


def test_removing_a_worker_node_mid_extraction_loses_no_text_unit(tmp_path):
    write_corpus(tmp_path / "corpus", n_docs=12)
    with SimulatorProcess(latency=0.3) as sim:
        root = make_root(tmp_path / "p", sim.base_url, **SECTIONS)
        copy_input(tmp_path / "corpus", root / "input")
        report = run_driver(root, "--kill-node-after-partitions", "2")
    assert report["removed"], "a node was removed during extraction"
    output = published_index(root)
    units = read_table(output, "text_units")
    failures = read_table(output, "failures")
    entity_units = {u for ids in read_table(output, "entities")["text_unit_ids"].to_list() for u in ids}
    assert failures.height == 0
    assert set(units["id"].to_list()) == entity_units, "every text unit's extraction landed"
