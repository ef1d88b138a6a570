"""Local model servers as they are: slow, serial (one answer at a time, and an abandoned answer generated to its
end), a /v1/models that waits while an answer is generated (llama.cpp's model lock). The simulator imitates each."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from graphrag_ray import api
from graphrag_ray.simulate.process import SimulatorProcess
from graphrag_ray.storage.tables import read_table
from tests.helpers import cli, published_index
from tests.integration.test_index import coffee_root

pytestmark = pytest.mark.slow  # servers and processes of their own: `-m "not slow"` leaves them out

QUESTION = "李明的咖啡店遇到了什么问题？"


def local_project(tmp: Path, base_url: str, **chat) -> Path:
    root = coffee_root(tmp, base_url)
    settings = yaml.safe_load((root / "settings.yaml").read_text(encoding="utf-8"))
    for model in settings["models"].values():
        model["api_base"] = base_url.replace("127.0.0.1", "localhost")  # plain http: answers are streamed
    settings["models"]["default_chat"].update(chat)
    settings["extract_graph"] = {"max_gleanings": 0}
    settings["workers"] = {"executor": "local"}
    (root / "settings.yaml").write_text(yaml.safe_dump(settings, allow_unicode=True), encoding="utf-8")
    return root


def test_a_slow_serial_server_finishes_with_no_request_sent_twice(tmp_path):
    """Every answer takes longer to generate than request_timeout, and the server serves one at a time: requests
    are judged by the server's progress (its tokens to any request), so none is abandoned and sent again."""
    with SimulatorProcess(stream_rate=120, serial=True, busy_models=True) as sim:
        root = local_project(tmp_path / "p", sim.base_url, request_timeout=0.5, stall_timeout=20, concurrency=4)
        api.build_index(root=root)
        stats = sim.stats()
    index = published_index(root)
    assert read_table(index, "failures").height == 0 and read_table(index, "entities").height > 5
    assert stats["max_sends_of_one_request"] == 1, stats
    assert stats.get("abandoned_answers", 0) == 0


def busy_with(base_url: str) -> threading.Thread:
    """Another client's long answer on the serial server (about 1,500 tokens: its /v1/models waits meanwhile)."""

    def ask():
        body = json.dumps(
            {
                "model": "gpt-4o-mini",
                "stream": True,
                "messages": [{"role": "user", "content": "Description List: " + "咖啡 " * 500}],
            }
        ).encode()
        request = urllib.request.Request(
            base_url + "/chat/completions", data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=120) as reply:
            reply.read()

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    return thread


def test_a_busy_models_list_is_not_an_unreachable_server(tmp_path):
    with SimulatorProcess() as clean:
        root = local_project(tmp_path / "p", clean.base_url)
        api.build_index(root=root)
    with SimulatorProcess(stream_rate=150, serial=True, busy_models=True) as sim:
        settings = yaml.safe_load((root / "settings.yaml").read_text(encoding="utf-8"))
        for model in settings["models"].values():
            model["api_base"] = sim.base_url.replace("127.0.0.1", "localhost")
        (root / "settings.yaml").write_text(yaml.safe_dump(settings, allow_unicode=True), encoding="utf-8")
        for method in ("local", "global", "drift", "basic"):
            busy = busy_with(sim.base_url)
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "graphrag_ray.cli",
                    "query",
                    "--root",
                    str(root),
                    "--method",
                    method,
                    f"{QUESTION} ({method})",
                ],
                capture_output=True,
                text=True,
                timeout=180,
            )
            busy.join(timeout=120)
            print(method, done.returncode, done.stderr[-600:])
            assert done.returncode == 0, done.stderr[-1500:]
            assert "unreachable" not in done.stderr and done.stdout.strip()
        assert asyncio.run(api.search(QUESTION, "local", root)).response.strip()


def point_at(root: Path, base_url: str) -> None:
    settings = yaml.safe_load((root / "settings.yaml").read_text(encoding="utf-8"))
    for model in settings["models"].values():
        model["api_base"] = base_url
    (root / "settings.yaml").write_text(yaml.safe_dump(settings, allow_unicode=True), encoding="utf-8")


def published_ledger(root: Path) -> dict:
    return json.loads(published_index(root).read_bytes("ledger.json"))["total"]


def test_a_failed_run_is_asked_again_and_billed_whole(tmp_path):
    """A run whose every answer is unusable does not publish. The same command asks the model again (the cached
    unusable answers are not replayed), so does --retry-failures with nothing published, and once the model
    answers, the published ledger counts every call of every attempt - what the servers served."""
    root = local_project(tmp_path / "p", "http://127.0.0.1:9/v1")
    served = 0
    with SimulatorProcess(answer_shape="only-example") as sloppy:
        point_at(root, sloppy.base_url)
        first = cli("index", "--root", str(root))
        after_first = sloppy.stats()["ok"]
        again = cli("index", "--root", str(root))
        after_again = sloppy.stats()["ok"]
        retried = cli("index", "--root", str(root), "--retry-failures")
        served += sloppy.stats()["ok"]
    assert first.returncode == again.returncode == retried.returncode == 1, retried.stderr[-800:]
    assert after_first > 0 and after_again - after_first >= 4 and served - after_again >= 4  # asked again
    assert "run `graphrag-ray index` first" not in retried.stderr and "resuming the unpublished run" in retried.stderr
    assert "asks the model again for the failed items" in first.stderr
    with SimulatorProcess() as good:
        point_at(root, good.base_url)
        done = cli("index", "--root", str(root), "--retry-failures")
        served += good.stats()["ok"]
    assert done.returncode == 0, done.stderr[-1500:]
    ledger = published_ledger(root)
    assert ledger["calls"] == served, (ledger, served)
    stats = json.loads(published_index(root).read_bytes("stats.json"))
    assert stats["total"]["calls"] == served and stats["this_attempt"]["calls"] < served


def test_no_cache_and_clearing_one_stage(tmp_path):
    with SimulatorProcess() as sim:
        root = local_project(tmp_path / "p", sim.base_url)
        assert cli("index", "--root", str(root)).returncode == 0
        built = sim.stats()
        sim.reset()
        cached = cli("index", "--root", str(root), "--force")  # the same input again: every answer cached
        assert cached.returncode == 0 and sim.stats().get("ok", 0) == 0, cached.stderr[-800:]
        sim.reset()
        uncached = cli("index", "--root", str(root), "--no-cache")
        assert uncached.returncode == 0 and sim.stats()["ok"] >= built["ok"], uncached.stderr[-800:]
        cleared = cli("cache", "clear", "--stage", "community_reports", "--root", str(root))
        assert cleared.returncode == 0 and "dropped" in cleared.stdout and " 0 answers" not in cleared.stdout
        assert "`graphrag-ray index --force` asks the model again" in cleared.stdout
        sim.reset()
        assert cli("index", "--root", str(root), "--force").returncode == 0
        kinds = {k: v for k, v in sim.stats().items() if k.startswith("kind_") and v}
    assert kinds.get("kind_community_report", 0) == built["kind_community_report"], kinds
    assert set(kinds) == {"kind_community_report"}, kinds  # that stage only


def test_a_log_gets_plain_progress_lines(tmp_path):
    with SimulatorProcess(latency=0.05) as sim:
        root = local_project(tmp_path / "p", sim.base_url)
        done = cli("index", "--root", str(root))
    assert done.returncode == 0
    lines = [line for line in done.stderr.splitlines() if line.startswith("[")]
    assert any("extract_graph: started" in line for line in lines)
    assert any("extract_graph: done" in line and "calls" in line for line in lines), lines


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_an_interrupted_run_and_its_resume_are_billed_whole(tmp_path, how):
    with SimulatorProcess(latency=0.4) as sim:
        root = local_project(tmp_path / "p", sim.base_url, concurrency=2)
        settings = yaml.safe_load((root / "settings.yaml").read_text(encoding="utf-8"))
        settings["extract_graph"] = {"max_gleanings": 1}
        (root / "settings.yaml").write_text(yaml.safe_dump(settings, allow_unicode=True), encoding="utf-8")
        # Ctrl-C as in a terminal: a test runner started in the background (`cmd &` with no job control) has
        # SIGINT ignored, and a child inherits that - the run would not stop, and there would be nothing to resume
        run = subprocess.Popen(
            [sys.executable, "-m", "graphrag_ray.cli", "index", "--root", str(root)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        deadline = time.monotonic() + 120
        while sim.stats().get("ok", 0) < 5 and time.monotonic() < deadline:  # mid-way through extraction
            time.sleep(0.02)
        # not at the very moment an answer went out: one the server sent whole but the client had no time to
        # read is billed by any server and known to no client (the next answers are 0.4 s of latency away)
        time.sleep(0.1)
        run.send_signal(how)
        _, said = run.communicate(timeout=60)
        interrupted = sim.stats()["ok"]
        # the run was stopped by the signal, not done before it came (then there would be nothing to resume)
        assert run.returncode in (130, -signal.SIGINT, -signal.SIGKILL), (run.returncode, said[-1500:])
        resumed = cli("index", "--root", str(root))
        served = sim.stats()["ok"]
    assert resumed.returncode == 0, resumed.stderr[-1500:]
    assert interrupted > 0 and served > interrupted
    assert published_ledger(root)["calls"] == served


class SilentEndpoint:
    """A server that takes connections and never sends a byte (a hung process, a port forwarded to nothing): a
    bare socket, no code of ours answering."""

    def __init__(self):
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.base_url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.held: list = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self):
        for conn in self.held:
            conn.close()
        self.sock.close()


def test_an_endpoint_that_never_answers_is_named_within_seconds(tmp_path):
    silent = SilentEndpoint()
    try:
        root = local_project(tmp_path / "p", silent.base_url, request_timeout=30)
        started = time.monotonic()
        done = cli("check", "--root", str(root))
        took = time.monotonic() - started
        assert done.returncode == 1 and took < 15, (took, done.stderr)
        assert "accepted the connection but sent no answer to GET /models" in done.stderr, done.stderr
        assert "localhost" in done.stderr.splitlines()[-1]  # names the endpoint
        # an index run may wait on a local server busy with another answer, but says why it waits at once
        assert _seconds_until_said(["index", "--root", str(root)]) < 15
        with SimulatorProcess() as sim:  # an index to ask, then its endpoint goes silent
            built = local_project(tmp_path / "q", sim.base_url)
            api.build_index(root=built)
        point_at(built, silent.base_url)
        assert _seconds_until_said(["query", QUESTION, "--root", str(built)]) < 15
    finally:
        silent.close()


def _seconds_until_said(args: list[str]) -> float:
    """Seconds until the command's stderr says the endpoint took the connection and sent nothing (inf: never)."""
    run = subprocess.Popen(
        [sys.executable, "-m", "graphrag_ray.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    started = time.monotonic()
    try:
        for line in run.stderr:
            if "accepted the connection but did not answer GET /models" in line:
                return time.monotonic() - started
        return float("inf")
    finally:
        run.kill()
        run.communicate()


def test_streams_cut_short_are_asked_again_and_the_index_is_whole(tmp_path):
    """llama-cpp-python's server ends a stream with [DONE] and no finish_reason whenever another request waits: a
    cut stream is no answer. It is asked again (with fewer requests in flight, then as whole answers), so the index
    publishes with no failure and the same graph as from a clean endpoint."""
    with SimulatorProcess() as clean:
        expected = local_project(tmp_path / "clean", clean.base_url, concurrency=8)
        api.build_index(root=expected)
    with SimulatorProcess(cut_streams=True, stream_rate=400) as cutting:  # answers take time: others wait
        root = local_project(tmp_path / "cut", cutting.base_url, concurrency=8)
        api.build_index(root=root)
        stats = cutting.stats()
    assert stats.get("cut_streams", 0) > 0, stats  # the endpoint did cut streams
    index = published_index(root)
    assert read_table(index, "failures").height == 0
    titles = set(read_table(index, "entities")["title"])
    assert titles == set(read_table(published_index(expected), "entities")["title"]) and len(titles) > 5
    ledger = json.loads(next((root / "output").rglob("ledger.json")).read_text())
    assert ledger["total"]["cut_streams"] == stats["cut_streams"], (ledger["total"], stats)


def test_a_long_prompt_read_slowly_is_waited_for_not_sent_twice(tmp_path):
    """A CPU server reads a 6,000-token prompt for 6 s before its first byte, against a stall_timeout of 2 s: the
    wait before the first byte grows with the prompt, so the request is answered once."""
    from graphrag_ray.config.load import load_settings
    from graphrag_ray.llm.models import Models

    with SimulatorProcess(prefill_rate=1000) as sim:
        root = local_project(tmp_path / "p", sim.base_url, stall_timeout=2)
        models = Models.create(load_settings(root), root)
        prompt = "李明 咖啡 " * 3000  # about 6,000 tokens
        answer = models.run(
            models.chat("default_chat").chat([{"role": "user", "content": prompt}], stage="long_prompt")
        )
        stats = sim.stats()
    assert answer and stats["max_sends_of_one_request"] == 1, stats
    usage = models.ledger.to_dict()["total"]
    assert usage["abandoned"] == 0 and usage["calls"] == 1 and usage["prompt_tokens"] >= 5000, usage


def test_a_run_whose_every_answer_is_garbage_ends_in_one_line_every_time(tmp_path):
    """Twenty runs against an endpoint whose every answer is garbage: each fails with one error line and no
    traceback - no stream reader left to be closed by the interpreter at exit ("generator didn't stop after
    athrow()", "an error occurred during closing of asynchronous generator")."""
    from concurrent.futures import ThreadPoolExecutor

    with SimulatorProcess(answer_mode="garbage") as sim:
        roots = [local_project(tmp_path / f"p{i}", sim.base_url) for i in range(2)]  # one per run at a time

        def run(i: int) -> tuple[int, str]:
            done = subprocess.run(
                [sys.executable, "-m", "graphrag_ray.cli", "index", "--root", str(roots[i % 2]), "--no-cache"],
                capture_output=True,
                text=True,
                timeout=300,
            )
            return done.returncode, done.stderr

        with ThreadPoolExecutor(2) as pool:  # run i and i+1 at once, on their own roots
            runs = []
            for pair in range(0, 20, 2):
                runs += list(pool.map(run, (pair, pair + 1)))
    for code, err in runs:
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert "items failed" in errors[-1] and "unusable" in errors[-1], errors
        noise = [w for w in ("Traceback", "athrow", "closing of asynchronous generator", "Task exception") if w in err]
        assert code == 1 and len(errors) == 1 and not noise, (code, noise, err[-3000:])
