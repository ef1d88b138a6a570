"""Deterministic fault injection: the same (seed, request body, attempt number) always draws the same fault,
so a run is reproducible and a retried request eventually gets through."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

FAULT_KINDS = ("429", "500", "503", "hang", "drop", "malformed")


@dataclass
class FaultRates:
    rate_429: float = 0.0
    rate_500: float = 0.0
    rate_503: float = 0.0
    rate_hang: float = 0.0
    rate_drop: float = 0.0
    rate_malformed: float = 0.0
    retry_after: float = 0.05  # seconds announced with an injected 429
    hang_seconds: float = 600.0  # how long a hung request sleeps (the client's timeout fires first)

    def draw(self, seed: int, request_key: str, attempt: int) -> str | None:
        digest = hashlib.sha256(f"{seed}:{request_key}:{attempt}".encode()).digest()
        u = int.from_bytes(digest[:8], "big") / 2**64
        edge = 0.0
        for kind in FAULT_KINDS:
            edge += getattr(self, f"rate_{kind}")
            if u < edge:
                return kind
        return None
