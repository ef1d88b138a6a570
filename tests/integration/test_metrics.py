"""An index job's counters reach Ray's metrics endpoint (Prometheus format, what the dashboard's Grafana reads):
calls, tokens and cost per stage equal the run's ledger, items done per step equal its items."""

from __future__ import annotations

import re
import time
import urllib.request

from graphrag_ray.api import build_index
from tests.integration.test_index import coffee_root


def scrape() -> dict[str, float]:
    """Sum of every `ray_graphrag_ray_*` sample by metric name (over tags and processes)."""
    import ray

    port = ray._private.worker.global_worker.node.metrics_export_port
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    sums: dict[str, float] = {}
    for line in text.splitlines():
        found = re.match(r"^(ray_graphrag_ray_\w+?)(?:\{[^}]*\})?\s+([0-9.eE+-]+)$", line)
        if found:
            sums[found.group(1)] = sums.get(found.group(1), 0.0) + float(found.group(2))
    return sums


def settled() -> dict[str, float]:
    """The counters once what earlier tests in this session paid has been exported: two scrapes a report interval
    apart (Ray's metrics agent reports every few seconds) that agree."""
    before, deadline = scrape(), time.time() + 90
    while time.time() < deadline:
        time.sleep(11)
        now = scrape()
        if now == before:
            return now
        before = now
    return before


def test_an_index_job_s_counters_equal_its_ledger(tmp_path, simulator, ray_session):
    root = coffee_root(tmp_path / "metrics", simulator.base_url)
    before = settled()
    result = build_index(root=root)
    total = result.ledger.total()
    items = sum(step.get("items") or 0 for step in result.stats["steps"].values())  # the item steps'
    wanted = {
        "ray_graphrag_ray_llm_calls_total": total.calls,
        "ray_graphrag_ray_prompt_tokens_total": total.prompt_tokens,
        "ray_graphrag_ray_completion_tokens_total": total.completion_tokens,
        "ray_graphrag_ray_items_done_total": items,
    }
    deadline, seen = time.time() + 90, {}
    while time.time() < deadline:  # the metrics agent exports every few seconds
        now = scrape()
        seen = {name: now.get(name, 0.0) - before.get(name, 0.0) for name in wanted}
        if seen == {name: float(value) for name, value in wanted.items()}:
            break
        time.sleep(2)
    assert seen == {name: float(value) for name, value in wanted.items()}, (seen, wanted)
    assert total.calls > 0 and items > 0
