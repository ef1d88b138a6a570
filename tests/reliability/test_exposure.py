"""What a command exposes on the machine's network: the Ray cluster a command starts for itself listens on loopback
only (`serve` and a Ray-executor `index`, each a process the test starts, its sockets listed with psutil); `serve`
joins only the cluster it is told of, never one `ray start` merely recorded here, and enforces the key it was given
wherever its replicas run."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.helpers import built_offline_example, offline_example
from tests.integration.test_serve import free_port

pytestmark = pytest.mark.reliability


def listening(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every listening socket of process `pid` and its descendants."""
    try:
        family = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return set()
    found = set()
    for proc in family:
        try:
            found |= {(c.laddr.ip, c.laddr.port) for c in proc.net_connections("inet") if c.status == "LISTEN"}
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def beyond_loopback(sockets: set[tuple[str, int]]) -> set[tuple[str, int]]:
    def loopback(ip: str) -> bool:
        address = ipaddress.ip_address(ip.split("%")[0])
        mapped = getattr(address, "ipv4_mapped", None)
        return (mapped or address).is_loopback

    return {s for s in sockets if not loopback(s[0])}


def command(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "graphrag_ray.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in {**os.environ, **(env or {})}.items() if k != "RAY_ADDRESS"},
    )


def test_a_ray_executor_index_listens_on_loopback_only(tmp_path):
    root = offline_example(tmp_path / "root", "ray")
    run = command("index", "--root", str(root), "--method", "fast")
    seen: set[tuple[str, int]] = set()
    while run.poll() is None:  # sampled through the run: Ray's daemons, its workers and actors as they come
        seen |= listening(run.pid)
        time.sleep(0.2)
    out, err = run.communicate()
    assert run.returncode == 0, err[-2000:]
    assert "Ray: started a local cluster" in out + err
    assert len(seen) >= 3, seen  # Ray's servers were seen (GCS, raylet, workers)
    assert not beyond_loopback(seen), beyond_loopback(seen)


def started_serving(proc: subprocess.Popen, timeout: float = 240) -> list[str]:
    """stderr lines up to 'serving … at URL'."""
    lines, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line.rstrip())
        if line.startswith("serving "):
            return lines
    proc.kill()
    raise AssertionError("serve did not start: " + "\n".join(lines[-30:]))


def status_with(url: str, key: str) -> int:
    request = urllib.request.Request(url + "/v1/models", headers={"Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status
    except urllib.error.HTTPError as refused:
        return refused.code


def stop(proc: subprocess.Popen) -> tuple[int, str]:
    proc.terminate()  # SIGTERM stops serve as Ctrl-C does: no Ray stack dump
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return proc.returncode, err


@pytest.mark.slow
def test_serve_binds_loopback_joins_only_what_it_is_told_and_enforces_its_own_key(tmp_path):
    root = built_offline_example(tmp_path / "root")
    ray_bin = Path(sys.executable).parent / "ray"
    head_port = free_port()
    # someone else's cluster, recorded on the machine by `ray start`, with its own environment and key
    # (a client joining a token-authenticated cluster by address says so: RAY_AUTH_MODE=token, Ray's own rule)
    theirs = {**os.environ, "GRAPHRAG_SERVE_API_KEY": "their-key-1", "RAY_AUTH_MODE": "token"}
    theirs.pop("RAY_ADDRESS", None)
    # --block: the cluster lives as long as this process, and only it is stopped at the end (never `ray stop`,
    # which would stop every cluster on the machine)
    cluster = subprocess.Popen(
        [
            str(ray_bin),
            "start",
            "--head",
            "--block",
            f"--port={head_port}",
            "--num-cpus=2",
            "--include-dashboard=false",
            "--disable-usage-stats",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=theirs,
    )
    head = f"127.0.0.1:{head_port}"
    try:
        deadline, record = time.monotonic() + 120, Path("/tmp/ray/ray_current_cluster")
        while not (record.exists() and record.read_text().strip().endswith(f":{head_port}")):
            assert cluster.poll() is None and time.monotonic() < deadline, "ray start did not record its cluster"
            time.sleep(0.5)
        # 1. no RAY_ADDRESS, no --address: a cluster of its own, on loopback only
        port = free_port()
        own = command("serve", "--root", str(root), "--port", str(port), env={"GRAPHRAG_SERVE_API_KEY": "my-key-2"})
        lines = started_serving(own)
        assert any("not joining the Ray cluster at" in line for line in lines), lines
        try:
            assert status_with(f"http://127.0.0.1:{port}", "my-key-2") == 200
            exposed = beyond_loopback(listening(own.pid))
            assert not exposed, exposed
        finally:
            code, err = stop(own)
        assert "SIGTERM received" not in err and "PC: @" not in err, err[-2000:]
        # 2. --address: it joins that cluster, and the key given to the command is the one enforced there
        port = free_port()
        joined = command(
            "serve",
            "--root",
            str(root),
            "--port",
            str(port),
            "--address",
            head,
            env={"GRAPHRAG_SERVE_API_KEY": "my-key-2", "RAY_AUTH_MODE": "token"},
        )
        started_serving(joined)
        try:
            url = f"http://127.0.0.1:{port}"
            assert status_with(url, "my-key-2") == 200
            assert status_with(url, "their-key-1") == 401
        finally:
            stop(joined)
    finally:
        end_family(cluster.pid)


def end_family(pid: int) -> None:
    """A process and every process under it (`ray start --block` leaves its daemons running on SIGTERM)."""
    try:
        family = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for proc in family:
        proc.terminate()
    _, alive = psutil.wait_procs(family, timeout=30)
    for proc in alive:
        proc.kill()
