"""What the simulator is told (its knobs, as `graphrag-ray simulate-llm` takes them) and how it counts a provider's
limits: requests and tokens over a sliding 60-second window."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from graphrag_ray.simulate.faults import FaultRates


@dataclass
class SimulatorConfig:
    seed: int = 0
    latency: float = 0.0  # seconds per request
    latency_per_token: float = 0.0  # extra seconds per completion token
    # seconds per embedding request (None: `latency`): real embedding endpoints answer in tens of milliseconds
    # where a chat answer takes seconds, so a query's one embedding is not a second model round
    embedding_latency: float | None = None
    rpm: int | None = None
    tpm: int | None = None
    api_key: str | None = None  # when set, requests must carry it (else 401)
    models: list[str] = field(default_factory=list)  # when set, other model names get 404
    embedding_dim: int = 256
    faults: FaultRates = field(default_factory=FaultRates)
    limits_after: list[tuple[float, int | None, int | None]] = field(default_factory=list)  # (seconds, rpm, tpm)
    answer_mode: str = "normal"  # normal | no-delimiter (extraction answers lack <|COMPLETE|>) | garbage
    no_usage: bool = False  # answers carry no usage figures (llama.cpp's server when streaming)
    float_embeddings: bool = False  # embeddings always as JSON floats, whatever encoding_format asks for
    stream_stall: float = 0.0  # seconds a streamed answer stops after its first piece (a stalled stream)
    fail_containing: str = ""  # chat requests holding this text always get a 500 (a permanent fault)
    refuse_containing: str = ""  # chat requests holding this text always get a 400 naming no parameter
    model_family: str = "plain"  # plain | openai-reasoning | deepseek-reasoner | think-tags (shapes.py)
    answer_shape: str = "clean"  # how answers are written (shapes.py: SHAPES)
    reasoning_tokens: int = 200  # about how long a reasoning family thinks per request
    stream_rate: float = 0.0  # tokens per second a slow local server generates (0: at once)
    serial: bool = False  # one answer generated at a time, and an abandoned one generated to its end
    busy_models: bool = False  # GET /models waits while an answer is generated (llama.cpp's model lock)
    # llama-cpp-python's server (interrupt_requests, on by default): a stream is ended with [DONE] and no
    # finish_reason whenever another chat request is waiting
    cut_streams: bool = False
    prefill_rate: float = 0.0  # prompt tokens read per second before the first byte (a CPU server; 0: at once)
    prompt_cache: bool = False  # OpenAI's prompt caching (prompt_cache.py): cached_tokens in every usage
    # the Batch API (batches.py): seconds a batch takes besides its answers; every n-th line fails; a batch
    # expires after answering this many lines; no Files/Batches endpoints at all
    batch_latency: float = 0.3
    batch_fail_every: int = 0
    batch_expire_after: int = 0
    no_batches: bool = False


class SlidingWindow:
    """What a provider counts: requests and tokens admitted in the last 60 seconds (its own arithmetic, not the
    client's limiter)."""

    def __init__(self):
        self.admitted: deque[tuple[float, int]] = deque()
        self.tokens = 0

    def _expire(self, now: float) -> None:
        while self.admitted and self.admitted[0][0] <= now - 60.0:
            self.tokens -= self.admitted.popleft()[1]

    def wait_for(self, now: float, tokens: int, rpm: int | None, tpm: int | None) -> float:
        """0 when a request of `tokens` fits now, else seconds until it would."""
        self._expire(now)
        count, used, wait = len(self.admitted), self.tokens, 0.0
        for at, amount in self.admitted:
            if (rpm is None or count + 1 <= rpm) and (tpm is None or used + min(tokens, tpm) <= tpm):
                break
            count, used, wait = count - 1, used - amount, at + 60.0 - now
        return wait

    def admit(self, now: float, tokens: int) -> None:
        self.admitted.append((now, tokens))
        self.tokens += tokens


def parse_limit_changes(text: str) -> list[tuple[float, int | None, int | None]]:
    """'60=75/7500,120=/20000' -> [(60.0, 75, 7500), (120.0, None, 20000)]."""
    changes = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        after, limits = part.split("=", 1)
        rpm, tpm = (limits.split("/", 1) + [""])[:2]
        changes.append((float(after), int(rpm) if rpm else None, int(tpm) if tpm else None))
    return changes
