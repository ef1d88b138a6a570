"""`index --batch`: every chat call of the item steps goes as a Batch API job (the simulator implements OpenAI's Files
and Batches endpoints), the index is the one a synchronous run publishes, failed and expired lines are asked again,
a killed command collects the job it left out (nothing is submitted twice), `--detach` stops once the jobs are out
and the same command goes on; an endpoint with no Batch API is one line, or synchronous calls by a setting."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graphrag_ray.api import build_index
from graphrag_ray.simulate.process import SimulatorProcess
from graphrag_ray.storage.schemas import REQUIRED_TABLES
from graphrag_ray.storage.tables import read_table
from tests.helpers import cli, make_root, published_index

COFFEE = Path(__file__).resolve().parents[2] / "examples" / "coffee_shop" / "input" / "coffee_shop.csv"
BATCH = {"poll_interval_s": 0.1}


def coffee_root(tmp: Path, base_url: str, executor: str = "local", **sections) -> Path:
    root = make_root(tmp, base_url, workers={"executor": executor}, batch={**BATCH, **sections.pop("batch", {})})
    (root / "input").mkdir(exist_ok=True)
    shutil.copy2(COFFEE, root / "input" / "coffee_shop.csv")  # its mtime is the documents' creation_date
    return root


@pytest.fixture(scope="module")
def synchronous(tmp_path_factory, simulator):
    """The index a synchronous run publishes, and what its chat calls cost (the batch runs are compared with it)."""
    root = coffee_root(tmp_path_factory.mktemp("sync"), simulator.base_url)
    result = build_index(root=root)
    totals = json.loads(result.index.read_bytes("ledger.json"))["stages"]
    chat_cost = sum(u["cost"] for stage, models in totals.items() for m, u in models.items() if stage != "embed")
    return result.index, chat_cost


def same_tables(index, reference) -> None:
    for name in REQUIRED_TABLES:
        assert read_table(index, name).equals(read_table(reference, name)), name


def test_index_batch_publishes_the_synchronous_index_with_no_synchronous_chat_call(tmp_path, synchronous, ray_session):
    reference, sync_chat_cost = synchronous
    with SimulatorProcess(batch_latency=0.2) as sim:
        root = coffee_root(tmp_path / "batch", sim.base_url, executor="ray")  # the jobs run from Ray actors
        result = build_index(root=root, batch=True)
        served = sim.stats()
    same_tables(result.index, reference)
    assert served.get("sync_chat", 0) == 0 and served["batch_served"] > 0
    assert served["max_batch_submissions_of_one_request"] == 1
    ledger = json.loads(result.index.read_bytes("ledger.json"))
    chat = [u for stage, models in ledger["stages"].items() if stage != "embed" for u in models.values()]
    assert sum(u["batch_calls"] for u in chat) == sum(u["calls"] for u in chat) == served["batch_served"]
    assert sum(u["cost"] for u in chat) == pytest.approx(sync_chat_cost * 0.5)  # gpt-4o-mini's batch discount
    assert read_table(result.index, "failures").height == 0


def test_failed_and_expired_lines_are_asked_again_and_nothing_fails(tmp_path, synchronous):
    reference, _ = synchronous
    with SimulatorProcess(batch_latency=0.1, batch_fail_every=3, batch_expire_after=2) as sim:
        root = coffee_root(tmp_path / "faulty", sim.base_url, batch={"resubmit": 10})
        result = build_index(root=root, batch=True)
        served = sim.stats()
    same_tables(result.index, reference)
    assert read_table(result.index, "failures").height == 0
    assert served.get("sync_chat", 0) == 0, "every line was answered by a later job"
    assert served["batches_created"] > 4  # the four passes' jobs, and the jobs asking again


def test_lines_that_keep_failing_are_sent_synchronously(tmp_path, synchronous):
    reference, _ = synchronous
    with SimulatorProcess(batch_latency=0.1, batch_fail_every=1) as sim:  # every line of every job fails
        root = coffee_root(tmp_path / "failing", sim.base_url, batch={"resubmit": 1})
        result = build_index(root=root, batch=True)
        served = sim.stats()
    same_tables(result.index, reference)
    assert served["sync_chat"] > 0 and served.get("batch_served", 0) == 0


def _wait_for_a_job(root: Path, driver: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline and driver.poll() is None:
        if [p for p in root.glob("runs/batches-*/*.json") if not p.name.startswith(".")]:
            return
        time.sleep(0.05)
    raise AssertionError(f"no Batch API job was submitted (driver exit {driver.poll()})")


def test_kill_minus_9_while_a_job_is_out_then_the_same_command_collects_it(tmp_path, synchronous):
    reference, _ = synchronous
    with SimulatorProcess(batch_latency=3.0) as sim:  # a job takes seconds: the kill lands while it is out
        root = coffee_root(tmp_path / "killed", sim.base_url)
        command = [sys.executable, "-m", "graphrag_ray.cli", "index", "--root", str(root), "--batch"]
        driver = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_for_a_job(root, driver)
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        assert not (root / "output").exists()
        again = cli("index", "--batch", root=root, timeout=300)
        assert again.returncode == 0, again.stderr
        served = sim.stats()
    assert served["max_batch_submissions_of_one_request"] == 1, "a request was submitted twice"
    same_tables(published_index(root), reference)


def test_detach_submits_and_exits_and_the_same_command_goes_on(tmp_path, synchronous):
    reference, _ = synchronous
    with SimulatorProcess(batch_latency=1.0) as sim:
        root = coffee_root(tmp_path / "detached", sim.base_url)
        first = cli("index", "--batch", "--detach", root=root)
        assert first.returncode == 0, first.stderr
        assert "Run the same command again to collect them" in first.stdout and "error" not in first.stderr
        assert not (root / "output").exists()
        for _ in range(20):  # each command collects what is done and submits the next pass's job
            time.sleep(1.0)
            again = cli("index", "--batch", "--detach", root=root)
            assert again.returncode == 0, again.stderr
            if "index published" in again.stdout:
                break
        else:
            raise AssertionError("the detached index never finished")
        served = sim.stats()
    assert served["max_batch_submissions_of_one_request"] == 1 and served.get("sync_chat", 0) == 0
    same_tables(published_index(root), reference)


def test_an_endpoint_with_no_batch_api_is_one_line_or_synchronous_calls(tmp_path, synchronous):
    reference, _ = synchronous
    with SimulatorProcess(no_batches=True) as sim:
        root = coffee_root(tmp_path / "nobatch", sim.base_url)
        refused = cli("index", "--batch", root=root)
        assert refused.returncode == 1
        errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "has no Batch API" in errors[0], refused.stderr
        assert "Traceback" not in refused.stderr and "extract_graph" not in refused.stderr  # said before any work
        fallback = coffee_root(tmp_path / "fallback", sim.base_url, batch={"fallback": "sync"})
        result = build_index(root=fallback, batch=True)
    same_tables(result.index, reference)


def test_a_job_made_before_its_id_was_written_down_is_found_at_the_provider(simulator):
    """A command killed between making a job and writing its id finds it by the digest in its metadata."""
    import asyncio

    from graphrag_ray.config.settings import ModelConfig
    from graphrag_ray.llm.batch_api import BatchAPI
    from graphrag_ray.llm.batch_collect import requests_digest

    async def made_then_found() -> tuple[str, list[str], list[str]]:
        config = ModelConfig(api_base=simulator.base_url, api_key="sk-test", model="gpt-4o-mini")
        api = BatchAPI("default_chat", config)
        try:
            digest = requests_digest(["k1"], 0)
            body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 5}
            line = json.dumps({"custom_id": "k1", "method": "POST", "url": api.endpoint, "body": body}) + "\n"
            made = await api.submit([line.encode()], digest)
            return made, await api.find(digest), await api.find(requests_digest(["k2"], 0))
        finally:
            await api.close()

    made, found, other = asyncio.run(made_then_found())
    assert found == [made] and other == []
