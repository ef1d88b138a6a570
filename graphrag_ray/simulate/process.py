"""Start the simulator in its own process (its CPU is kept apart from the engine's) and talk to it."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from typing import Any


class SimulatorProcess:
    """`with SimulatorProcess(latency=0.1, tpm=60000) as sim: sim.base_url ...`"""

    def __init__(self, **knobs: Any):
        self.knobs = knobs
        self.proc: subprocess.Popen | None = None
        self.base_url = ""

    def start(self) -> SimulatorProcess:
        args = [sys.executable, "-m", "graphrag_ray.cli", "simulate-llm", "--port", "0"]
        for name, value in self.knobs.items():
            if value is None or value is False:
                continue
            flag = "--" + name.replace("_", "-")
            if value is True:
                args.append(flag)
            elif isinstance(value, (list, tuple)):
                args += [flag, ",".join(map(str, value))]
            else:
                args += [flag, str(value)]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if "listening on" not in line:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise RuntimeError(f"simulator did not start: {line} {err}")
        self.base_url = line.rsplit(" ", 1)[-1].strip()
        return self

    def _call(self, path: str, method: str = "GET") -> dict:
        req = urllib.request.Request(self.base_url + path, method=method, data=b"" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def stats(self) -> dict:
        return self._call("/_stats")

    def reset(self) -> dict:
        return self._call("/_reset", "POST")

    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def __enter__(self) -> SimulatorProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
