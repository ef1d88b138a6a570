"""Run an index on a ray.cluster_utils.Cluster (head with no CPUs + 2 worker nodes on this machine), in its own
process so the test session's Ray is untouched. Prints one JSON line with what the test checks.

    python tests/reliability/multinode_driver.py ROOT [--kill-node-after-partitions N]
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import ray
from ray.cluster_utils import Cluster


def main() -> None:
    root = Path(sys.argv[1])
    kill_after = (
        int(sys.argv[sys.argv.index("--kill-node-after-partitions") + 1])
        if "--kill-node-after-partitions" in sys.argv
        else None
    )
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    worker_ids = {w.node_id for w in workers}
    removed = {}

    def remove_one_when_busy():
        while len(list(root.glob("runs/*/_done/extract_graph/*"))) < kill_after:
            time.sleep(0.05)
        victim = workers[1]
        removed["node_id"] = victim.node_id
        removed["markers_at_removal"] = len(list(root.glob("runs/*/_done/extract_graph/*")))
        cluster.remove_node(victim, allow_graceful=False)
        cluster.add_node(num_cpus=1)  # the cluster heals, as an autoscaler would

    if kill_after is not None:
        threading.Thread(target=remove_one_when_busy, daemon=True).start()
    from graphrag_ray.api import build_index

    try:
        result = build_index(root=root)
        print(
            json.dumps(
                {
                    "worker_node_ids": sorted(worker_ids),
                    "partition_nodes": result.node_ids,
                    "removed": removed,
                    "rows": result.stats["rows"],
                    "failures": result.stats["total"]["failures"],
                    "extract_partitions": result.stats["steps"]["extract_graph"]["partitions"],
                    "calls": result.ledger.total().calls,
                }
            )
        )
    finally:  # never leave a cluster behind: a later ray.init() would join it
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
