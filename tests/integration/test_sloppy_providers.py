"""What real providers and local models do, and what the engine makes of it: an endpoint that is down, a wrong
key or model at query time, a stream that stalls, answers without the completion delimiter, garbage for every
request, and servers that report no usage."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
import yaml

from graphrag_ray import api
from graphrag_ray.llm.ledger import UsageLedger
from graphrag_ray.simulate.process import SimulatorProcess
from graphrag_ray.storage.tables import read_table
from tests.helpers import cli, published_index, published_version
from tests.integration.test_index import COFFEE, coffee_root

QUESTION = "李明的咖啡店遇到了什么问题？"
PROGRESS = re.compile(r"^\[\d\d:\d\d:\d\d\] ")  # progress lines, for a log (no terminal)


def timed_cli(*args: str, timeout: int = 120) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    done = cli(*args, timeout=timeout)
    return done, time.monotonic() - started


def lines(done: subprocess.CompletedProcess) -> list[str]:
    return [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pointed_at(root: Path, copy: Path, base_url: str, **chat: object) -> Path:
    """A copy of an indexed project whose models point at another endpoint (and may change the chat entry)."""
    shutil.copytree(root, copy)
    settings = yaml.safe_load((copy / "settings.yaml").read_text(encoding="utf-8"))
    for model in settings["models"].values():
        model["api_base"] = base_url
        model["request_timeout"] = 30
    settings["models"]["default_chat"].update(chat)
    (copy / "settings.yaml").write_text(yaml.safe_dump(settings, allow_unicode=True), encoding="utf-8")
    return copy


@pytest.fixture(scope="module")
def indexed(tmp_path_factory, simulator, ray_session):
    root = coffee_root(tmp_path_factory.mktemp("sloppy"), simulator.base_url)
    api.build_index(root=root)
    return root


@pytest.mark.parametrize("case", ["down", "401", "unknown model"])
def test_a_query_names_an_unusable_endpoint_in_seconds_with_one_line(indexed, tmp_path, case):
    if case == "down":
        sim, expect = None, "unreachable"
    elif case == "401":
        sim, expect = SimulatorProcess(api_key="sk-the-right-one").start(), "authentication failed (401)"
    else:
        sim, expect = SimulatorProcess(models="gpt-4o-mini,text-embedding-3-small").start(), "not found"
    try:
        base_url = sim.base_url if sim else f"http://127.0.0.1:{free_port()}/v1"
        chat = {"model": "gpt-nonexistent"} if case == "unknown model" else {}
        root = pointed_at(indexed, tmp_path / "project", base_url, **chat)
        for method in ("local", "global"):
            done, seconds = timed_cli("query", "--root", str(root), "--method", method, f"{QUESTION} ({case})")
            print(f"{case} / {method}: exit {done.returncode} after {seconds:.1f} s: {lines(done)}")
            assert done.returncode == 1
            assert len(lines(done)) == 1 and expect in lines(done)[0], lines(done)
            assert "Traceback" not in done.stderr
            # the whole retry budget would be minutes (10 attempts with backoff; 30-s timeouts)
            assert seconds < 60
    finally:
        if sim:
            sim.stop()


def test_a_stalled_stream_ends_with_one_line_and_the_generated_part_is_in_the_ledger(indexed, tmp_path):
    with SimulatorProcess(stream_stall=60) as sim:
        root = pointed_at(indexed, tmp_path / "project", sim.base_url, request_timeout=3, stall_timeout=3)
        done, seconds = timed_cli("query", "--root", str(root), "--method", "basic", "--streaming", QUESTION)
    print(f"stalled stream: exit {done.returncode} after {seconds:.1f} s: {done.stderr.strip()!r}")
    assert done.returncode == 1 and "no answer for 3s" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout.endswith("\n"), "the partial answer ends its line; the error is on a line of its own"
    assert len([line for line in done.stderr.splitlines() if line.strip()]) == 1
    assert seconds < 50, "ended by the stall timeout, not by the 60-s stall"


def test_answers_without_the_completion_delimiter_are_used_with_no_extra_call(tmp_path, ray_session):
    counts = {}
    for mode in ("normal", "no-delimiter"):
        with SimulatorProcess(answer_mode=mode) as sim:
            root = coffee_root(tmp_path / mode, sim.base_url)
            result = api.build_index(root=root)
            served = sim.stats()
        entities = read_table(result.index, "entities")
        failures = read_table(result.index, "failures")
        assert entities.height > 10 and failures.height == 0, mode
        counts[mode] = (
            result.ledger.total("extract_graph").calls,
            served.get("kind_extract_graph", 0),
            entities.height,
        )
    units = read_table(result.index, "text_units").height
    print("extract calls / server extraction calls / entities:", counts, "text units:", units)
    assert counts["no-delimiter"][0] <= counts["normal"][0] + units, "at most one extra call per text unit"
    assert counts["no-delimiter"][2] == counts["normal"][2], "the same graph"


def test_garbage_for_every_request_stops_before_publishing_and_every_paid_answer_is_counted(tmp_path):
    with SimulatorProcess(answer_mode="garbage") as sim:
        root = coffee_root(tmp_path / "garbage", sim.base_url)
        done, seconds = timed_cli("index", "--root", str(root), timeout=600)
        served = sim.stats()
    print(f"garbage: exit {done.returncode} after {seconds:.1f} s: {lines(done)[-1:]}")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    message = [line for line in done.stderr.splitlines() if line.strip() and not PROGRESS.match(line)]
    assert len(message) == 1, message
    assert "extract_graph" in message[0] and "unusable twice (not in the format asked for)" in message[0]
    assert 'the answer began: "I am not sure what you mean.' in message[0]
    assert published_version(root) is None, "nothing published"
    ledger_path = message[0].rsplit("ledger in ", 1)[1].strip()
    ledger = UsageLedger.from_dict(json.loads(Path(ledger_path).read_text()))
    total = ledger.total()
    # every answer the server wrote is in the ledger: paid and read, or given up on after sending (on a loaded
    # machine a request can pass its request_timeout while the server still finishes it - billed by a provider)
    assert total.calls + total.abandoned == served["ok"], "every paid answer is in the ledger"
    assert total.abandoned <= total.retries
    assert total.unusable == served["kind_extract_graph"] == 2 * total.failures, "asked once more, changed, then failed"


def test_a_server_that_reports_no_usage_is_counted_with_the_tokenizer(tmp_path, ray_session):
    """A llama.cpp-like server: no usage figures, and embeddings as JSON floats though base64 was asked for."""
    with SimulatorProcess(no_usage=True, float_embeddings=True) as sim:
        root = coffee_root(tmp_path / "no-usage", sim.base_url)
        result = api.build_index(root=root)
        served = sim.stats()
    total = result.ledger.total()
    assert total.calls == served["ok"] and total.counted_here == total.calls
    # the simulator counts with the same tokenizers: what was counted here is what it served
    assert total.prompt_tokens == served["prompt_tokens"]
    assert total.completion_tokens == served["completion_tokens"]
    ledger = json.loads((published_index(root).local_path() / "ledger.json").read_text())
    assert ledger["total"]["counted_here"] == total.calls
    assert read_table(result.index, "entities").filter(pl.col("title") == "李明").height == 1
    # the float vectors were read as sent: each text unit's vector is the simulator's vector of its text
    import numpy as np
    import pyarrow as pa

    from graphrag_ray.llm.local_embedding import ngram_vector

    flat = pa.ipc.open_file(str(result.index.local_path() / "lancedb" / "text_unit_text.flat.arrow")).read_all()
    units = dict(zip(*read_table(result.index, "text_units").select("id", "text").to_dict(as_series=False).values()))
    assert flat.num_rows == len(units)
    for unit_id, vector in zip(flat["id"].to_pylist(), flat["vector"].to_pylist()):
        expected = np.asarray(ngram_vector(units[unit_id], 256), dtype=np.float32)
        assert np.allclose(vector, expected / np.linalg.norm(expected), atol=1e-6)


def test_retry_failures_calls_only_the_failed_items_and_publishes_a_healed_version(tmp_path, ray_session):
    from tests.helpers import make_root
    from tests.integration.test_resume import write_corpus

    corpus = tmp_path / "corpus"
    write_corpus(corpus, n_docs=8)
    # a fault permanent for one document's requests (the whole retry budget spent on it), the rest answered
    with SimulatorProcess(fail_containing="the 5-th project") as sim:
        root = make_root(tmp_path / "project", sim.base_url, output={"max_failure_ratio": 0.5})
        shutil.copytree(corpus, root / "input")
        first = api.build_index(root=root)
        faults = sim.stats().get("fault_permanent", 0)
    failed = read_table(first.index, "failures")
    assert faults > 0 and failed.height >= 1 and set(failed["step"]) == {"extract_graph"}
    units = read_table(first.index, "text_units")
    broken = set(units.filter(pl.col("text").str.contains("the 5-th project"))["id"])
    assert set(failed["item_id"]) == broken
    first_version = published_version(root)

    with SimulatorProcess() as healed:  # the provider is fine again (another endpoint: not part of the run id)
        text = (root / "settings.yaml").read_text().replace(sim.base_url, healed.base_url)
        (root / "settings.yaml").write_text(text)
        done, _ = timed_cli("index", "--root", str(root), "--retry-failures", timeout=600)
        served = healed.stats()
        again, _ = timed_cli("index", "--root", str(root), "--retry-failures")
    assert done.returncode == 0, done.stderr
    assert f"retried the {failed.height} failed items" in done.stdout
    assert served["kind_extract_graph"] == len(broken), "extraction calls for the failed text units only"
    assert published_version(root) != first_version, "published as a new version"
    index = published_index(root)
    assert read_table(index, "failures").height == 0

    def held(version) -> set[str]:  # the text units some entity of the version was found in
        return {u for units in read_table(version, "entities")["text_unit_ids"].to_list() for u in units or ()}

    assert not held(first.index) & broken and broken <= held(index), "what the failed unit held is in"
    assert set(read_table(first.index, "entities")["title"]) <= set(read_table(index, "entities")["title"])
    ledger = json.loads((index.local_path() / "ledger.json").read_text())
    assert ledger["total"]["calls"] == served["ok"], "the ledger shows the calls the retry spent"
    assert again.returncode == 0 and "nothing to retry" in again.stdout


def test_init_then_fast_index_with_no_key_says_which_model_at_once(tmp_path):
    root = tmp_path / "offline"
    done, _ = timed_cli("init", "--root", str(root))
    assert done.returncode == 0
    (root / "input").mkdir(exist_ok=True)
    shutil.copy(COFFEE, root / "input")
    env_free = subprocess.run(
        [sys.executable, "-m", "graphrag_ray.cli", "index", "--root", str(root), "--method", "fast"],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "GRAPHRAG_API_KEY"},
    )
    message = [line for line in env_free.stderr.splitlines() if line.strip()]
    assert env_free.returncode != 0 and len(message) == 1, message
    assert "default_embedding" in message[0] and "local_embedding" in message[0]
    assert published_version(root) is None


def test_answers_cut_at_max_tokens_keep_their_complete_records_without_a_re_ask(tmp_path, ray_session):
    with SimulatorProcess() as sim:
        runs = {}
        for name, max_tokens in (("whole", 800), ("cut", 90)):
            root = coffee_root(tmp_path / name, sim.base_url)
            settings = yaml.safe_load((root / "settings.yaml").read_text(encoding="utf-8"))
            settings["models"]["extract_chat"] = {**settings["models"]["default_chat"], "max_tokens": max_tokens}
            settings["extract_graph"] = {"model_id": "extract_chat"}
            (root / "settings.yaml").write_text(yaml.safe_dump(settings, allow_unicode=True), encoding="utf-8")
            runs[name] = api.build_index(root=root)
    whole, cut = runs["whole"], runs["cut"]
    events = cut.stats["steps"]["extract_graph"]["events"]
    assert events.get("cut_answers", 0) > 0 and not whole.stats["steps"]["extract_graph"]["events"].get("cut_answers")
    assert read_table(cut.index, "failures").height == 0
    assert cut.ledger.total("extract_graph").calls == whole.ledger.total("extract_graph").calls, "no re-ask"
    assert cut.ledger.total("extract_graph").unusable == 0
    cut_titles = set(read_table(cut.index, "entities")["title"])
    assert 0 < len(cut_titles) < len(set(read_table(whole.index, "entities")["title"])) + 1
    assert cut_titles & set(read_table(whole.index, "entities")["title"]), "the records before the cut are kept"


def test_init_force_keeps_the_key_and_copies_of_edited_files_and_prompt_tune_says_what_update_will_do(tmp_path):
    root = tmp_path / "kept"
    assert timed_cli("init", "--root", str(root))[0].returncode == 0
    (root / ".env").write_text("GRAPHRAG_API_KEY=sk-saved-key\n")
    settings = root / "settings.yaml"
    settings.write_text(settings.read_text() + "\n# my edit\n")
    done, _ = timed_cli("init", "--root", str(root), "--force")
    assert done.returncode == 0
    assert (root / ".env").read_text() == "GRAPHRAG_API_KEY=sk-saved-key\n", "the saved key is untouched"
    copies = list(root.glob("settings.yaml.*.bak"))
    assert len(copies) == 1 and copies[0].read_text().endswith("# my edit\n")
    assert f"kept the previous file as {copies[0]}" in done.stdout
    assert not list((root / "prompts").glob("*.bak")), "unedited prompts are rewritten as they were: no copies"
    with SimulatorProcess() as sim:
        tuned = coffee_root(tmp_path / "tuned", sim.base_url)
        shutil.copytree(root / "prompts", tuned / "prompts")  # the prompts init wrote
        api.build_index(root=tuned)
        done, _ = timed_cli("prompt-tune", "--root", str(tuned), "--sample", "2")
    assert done.returncode == 0, done.stderr
    kept = list((tuned / "prompts").glob("*.bak"))
    assert kept and "kept the previous prompt as" in done.stdout
    assert "`graphrag-ray update` will refuse the new ones" in done.stdout


def test_index_on_an_unchanged_input_publishes_nothing_unless_forced(tmp_path):
    with SimulatorProcess() as sim:
        root = coffee_root(tmp_path / "same", sim.base_url)
        first, _ = timed_cli("index", "--root", str(root))
        published = published_version(root)
        again, _ = timed_cli("index", "--root", str(root))
        served = sim.stats()["ok"]
        forced, _ = timed_cli("index", "--root", str(root), "--force")
    assert first.returncode == again.returncode == forced.returncode == 0, again.stderr + forced.stderr
    assert "nothing to index: the published index is of this input" in again.stdout
    assert "`--force` builds it again" in again.stdout
    versions = list((root / "output" / "versions").iterdir())
    assert published_version(root) != published and len(versions) == 2, "only --force published a second version"
    assert served == sim_calls_of(first), "the unchanged run called nothing"


def sim_calls_of(done: subprocess.CompletedProcess) -> int:
    """The calls an index command's usage table says it paid (its total row)."""
    row = [line for line in done.stdout.splitlines() if line.lstrip("│ ").startswith("total")][-1]
    return int(row.split("│")[3].strip().replace(",", ""))


def test_a_unit_cut_at_max_tokens_before_any_record_is_asked_again_then_a_failure(tmp_path, ray_session):
    """An answer that hit max_tokens with no complete record is no extraction: asked again with twice the budget,
    and when that is cut too the unit is a failure with its reason - never a unit done with nothing found."""
    with SimulatorProcess() as sim:
        root = coffee_root(tmp_path / "tiny", sim.base_url)
        settings = yaml.safe_load((root / "settings.yaml").read_text(encoding="utf-8"))
        settings["models"]["extract_chat"] = {**settings["models"]["default_chat"], "max_tokens": 4}
        settings["extract_graph"] = {"model_id": "extract_chat", "max_gleanings": 0}
        settings["output"] = {"max_failure_ratio": 1.0}  # published with its failures, to be looked at
        (root / "settings.yaml").write_text(yaml.safe_dump(settings, allow_unicode=True), encoding="utf-8")
        run = api.build_index(root=root)
    units = read_table(run.index, "text_units").height
    failures = read_table(run.index, "failures").filter(pl.col("step") == "extract_graph")
    assert failures.height == units, failures
    assert all("cut off at max_tokens" in reason for reason in failures["reason"]), failures["reason"].to_list()
    assert run.ledger.total("extract_graph").calls == 2 * units  # each asked twice: 4, then 8 tokens


def test_gleaning_rounds_refused_twice_are_said_once_and_fail_no_item(tmp_path):
    """A model that answers gleaning in prose: each round is asked again once, then ends; the usage table's
    failures and the run's `failures 0` are explained in one line, and report.md says the same."""
    from tests.helpers import cli_in_process

    with SimulatorProcess(answer_shape="prose-gleaning") as sim:
        root = coffee_root(tmp_path / "prose", sim.base_url)
        done = cli_in_process("index", root=root)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert "gleaning rounds ended on an answer unusable twice" in said and "failures 0" in said, said
    reported = cli_in_process("report", "--out", tmp_path / "report", root=root)
    assert reported.returncode == 0, reported.stderr
    assert "gleaning rounds ended on an answer unusable twice" in (tmp_path / "report" / "report.md").read_text()
