"""An endpoint that accepts the connection and never answers: every interactive question - `query` with each
method, `chat` - ends within query.deadline_s (+5 s) with one line naming the endpoint, and says it is waiting at
least every 15 s meanwhile. (A served question: tests/integration/test_serve.py.)"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers import built_offline_example

pytestmark = pytest.mark.reliability

DEADLINE = 12.0


@contextlib.contextmanager
def silent_endpoint():
    """A port that takes every connection (the kernel completes the handshake) and never sends a byte."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(256)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"


def silent_root(tmp: Path, base_url: str) -> Path:
    """The coffee shop index (built offline), its chat model then pointed at the silent endpoint with a key."""
    root = built_offline_example(tmp / "root")
    settings = yaml.safe_load((root / "settings.yaml").read_text(encoding="utf-8"))
    settings["models"]["default_chat"].update({"api_base": base_url, "api_key": "sk-silent", "model": "gpt-4o-mini"})
    settings["query"] = {"deadline_s": DEADLINE}
    (root / "settings.yaml").write_text(yaml.safe_dump(settings, allow_unicode=True), encoding="utf-8")
    return root


def started(*args: str, stdin=None) -> tuple[subprocess.Popen, float]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "graphrag_ray.cli", *args],
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    return proc, time.monotonic()


def test_every_interactive_question_ends_by_its_deadline_naming_the_endpoint(tmp_path):
    with silent_endpoint() as url:
        root = silent_root(tmp_path, url)
        # how long the command takes to start and load the index with no model call: the deadline comes on top
        offline, t0 = started("query", "--root", str(root), "--method", "local", "--no-llm", "李明的咖啡店")
        offline.communicate(timeout=120)
        startup = time.monotonic() - t0
        runs = {
            method: started("query", "--root", str(root), "--method", method, "李明的咖啡店遇到了哪些挑战？")
            for method in ("local", "global", "drift", "basic")
        }
        runs["chat"] = started("chat", "--root", str(root), stdin=True)
        runs["chat"][0].stdin.write("李明的咖啡店遇到了哪些挑战？\n")
        runs["chat"][0].stdin.flush()
        ended = {}
        for name, (proc, t0) in runs.items():
            out, err = proc.communicate(timeout=DEADLINE * 10)
            ended[name] = (proc.returncode, time.monotonic() - t0, out, err)
    # five commands at once on two cores: each one's start-up is slower than the lone one measured
    slack = 5.0 + 3 * startup
    for name, (code, took, _out, err) in ended.items():
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 1, (name, code, err[-2000:])
        assert took <= DEADLINE + slack, (name, took, DEADLINE + slack)
        last = lines[-1]
        assert last.startswith("error: ") and url in last and "query.deadline_s" in last, (name, last)
        assert "Traceback" not in err, (name, err[-3000:])
        waiting = [line for line in lines if re.search(r"waiting for model 'gpt-4o-mini' .* \d+ s", line)]
        assert waiting, (name, err)  # said while it waited (every 10 s, so once within 12 s)
