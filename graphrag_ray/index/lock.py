"""One index run per root at a time. The lock file names its holder; a lock whose process is gone (a crashed
run on this host) is taken over, so a crash never leaves a root locked forever."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from graphrag_ray.errors import RunLockedError

LOCK_NAME = ".graphrag-ray.lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunLock:
    def __init__(self, root: Path, stale_after_s: float = 24 * 3600):
        self.path = Path(root) / LOCK_NAME
        self.stale_after_s = stale_after_s
        self.held = False

    def acquire(self) -> None:
        me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = self._holder()
                if holder and not self._stale(holder):
                    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.get("started", 0)))
                    raise RunLockedError(
                        f"another index run (pid {holder.get('pid')} on {holder.get('host')}, "
                        f"started {started}) holds {self.path}; wait for it or remove the file if "
                        "that run is gone"
                    ) from None
                self.path.unlink(missing_ok=True)
                continue
            with os.fdopen(fd, "w") as f:
                json.dump(me, f)
            self.held = True
            return
        raise RunLockedError(f"could not take {self.path}")

    def _holder(self) -> dict | None:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None

    def _stale(self, holder: dict) -> bool:
        if holder.get("host") == socket.gethostname():
            return not _alive(int(holder.get("pid", -1)))
        return time.time() - float(holder.get("started", 0)) > self.stale_after_s

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
