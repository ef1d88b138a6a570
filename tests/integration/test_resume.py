"""kill -9 of the index driver mid-extraction, then re-run: same tables, calls paid twice <= calls in flight."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graphrag_ray.api import build_index
from graphrag_ray.exec.executor import PARTITIONS_PER_WORKER
from graphrag_ray.simulate.process import SimulatorProcess
from graphrag_ray.storage.schemas import REQUIRED_TABLES
from graphrag_ray.storage.tables import read_table
from tests.helpers import make_root

SECTIONS = dict(
    workers={"executor": "ray", "num_actors": 2, "partition_size": 2, "actor_cpus": 0},
    chunks={"size": 300, "overlap": 30},
)


def write_corpus(folder: Path, n_docs: int = 12) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    people = ["Alice Martin", "Bob Chen", "Carol Diaz", "David Okafor", "Eva Novak", "Frank Li"]
    places = ["Paris", "Hangzhou", "Lagos", "Prague", "Lima", "Oslo"]
    for d in range(n_docs):
        a, b = people[d % 6], people[(d + 1) % 6]
        p, q = places[d % 6], places[(d + 2) % 6]
        text = " ".join(
            f"In {p}, {a} met {b} to plan the {d}-th project of Acme Corp. {b} later travelled to {q} "
            f"where {a} had opened an office for Globex Inc. Sentence {k} adds detail about {a} and {b}."
            for k in range(6)
        )
        (folder / f"doc{d:02d}.txt").write_text(text, encoding="utf-8")


def copy_input(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        shutil.copy2(f, dst / f.name)  # keep mtimes: creation_date is part of the tables


@pytest.fixture(scope="module")
def reference(tmp_path_factory, ray_session):
    """The uninterrupted build every crash is compared with: the same corpus and settings against a simulator
    with no latency (its answers do not depend on it), so the three crash tests pay for one quick build."""
    tmp = tmp_path_factory.mktemp("reference")
    write_corpus(tmp / "corpus")
    with SimulatorProcess() as sim:
        root = make_root(tmp / "reference", sim.base_url, **SECTIONS)
        copy_input(tmp / "corpus", root / "input")
        clean = build_index(root=root)
        calls = sim.stats()["ok"]
    assert clean.ledger.total().calls == calls
    return tmp / "corpus", clean, calls


@pytest.mark.reliability
@pytest.mark.parametrize(
    "step, markers, calls_per_item",
    [("extract_graph", 2, 2), ("summarize_descriptions", 2, 1), ("community_reports", 1, 1)],
)
def test_kill_minus_9_then_resume(tmp_path, reference, step, markers, calls_per_item):
    corpus, clean, clean_calls = reference
    with SimulatorProcess(latency=0.4) as sim:  # slow enough for the kill to land inside the step
        root = make_root(tmp_path / "crashed", sim.base_url, **SECTIONS)
        copy_input(corpus, root / "input")
        driver = subprocess.Popen(
            [sys.executable, "-m", "graphrag_ray.cli", "index", "--root", str(root)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.time() + 180
        found: list = []
        while time.time() < deadline and driver.poll() is None:
            # a marker being written is a hidden temp file until its rename (pathlib's glob lists those too)
            found = [m for m in root.glob(f"runs/*/_done/{step}/*") if not m.name.startswith(".")]
            if len(found) >= markers:
                break
            time.sleep(0.02)
        assert driver.poll() is None and len(found) >= markers, f"the driver should be in {step}"
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        time.sleep(1.0)  # let requests already sent finish server-side
        calls_before_resume = sim.stats()["ok"]
        assert not (root / "output").exists(), "nothing is published by a killed run"

        resumed = build_index(root=root)  # the dead driver's lock is stale and taken over
        paid = sim.stats()["ok"]  # this simulator served the killed run and its resume only
    # calls that can be in flight at the kill: every actor's partitions (extraction: first pass + one gleaning)
    in_flight_bound = 2 * PARTITIONS_PER_WORKER * SECTIONS["workers"]["partition_size"] * calls_per_item
    print(
        f"{step}: reference calls {clean_calls}, paid before kill {calls_before_resume}, total paid {paid}, "
        f"paid twice {paid - clean_calls} (bound {in_flight_bound})"
    )
    stats = resumed.stats["steps"][step]
    # the kill may land after the step's last partition: then the whole step is taken from the run
    assert stats.get("resumed") is True or stats["resumed_partitions"] >= markers
    assert paid - clean_calls <= in_flight_bound
    for name in REQUIRED_TABLES:
        assert read_table(resumed.index, name).equals(read_table(clean.index, name)), name


@pytest.mark.reliability
def test_kill_minus_9_during_update_keeps_the_published_index_and_a_rerun_finishes_it(tmp_path, ray_session):
    from graphrag_ray.api import update_index
    from tests.helpers import published_version

    corpus = tmp_path / "corpus"
    write_corpus(corpus)
    added = tmp_path / "added"
    write_corpus(added, 14)  # documents 12 and 13 are new
    with SimulatorProcess(latency=0.4) as sim:
        reference = make_root(tmp_path / "reference", sim.base_url, **SECTIONS)
        root = make_root(tmp_path / "crashed", sim.base_url, **SECTIONS)
        for project in (reference, root):
            copy_input(corpus, project / "input")
            build_index(root=project)
            for name in ("doc12.txt", "doc13.txt"):
                shutil.copy2(added / name, project / "input" / name)
        clean = update_index(root=reference)

        before = published_version(root)
        old_runs = set(root.glob("runs/*"))
        driver = subprocess.Popen(
            [sys.executable, "-m", "graphrag_ray.cli", "update", "--root", str(root)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.time() + 180
        while (
            time.time() < deadline
            and driver.poll() is None
            and not [m for m in root.glob("runs/*/_done/extract_graph/*") if m.parents[2] not in old_runs]
        ):
            time.sleep(0.02)
        assert driver.poll() is None, "the update should still be running, past its first extraction partition"
        second = subprocess.run(
            [sys.executable, "-m", "graphrag_ray.cli", "update", "--root", str(root)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        assert second.returncode != 0 and "lock" in second.stderr, "a second update while one runs is refused"
        assert published_version(root) == before, "a killed update publishes nothing"

        resumed = update_index(root=root)  # the dead driver's lock is stale and taken over
    assert published_version(root) != before
    extraction = resumed.stats["steps"]["extract_graph"]  # what the killed run finished is not done again
    assert extraction.get("resumed") is True or extraction["resumed_partitions"] >= 1
    for name in REQUIRED_TABLES:
        assert read_table(resumed.index, name).equals(read_table(clean.index, name)), name
