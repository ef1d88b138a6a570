"""One RPM/TPM limiter for the whole job, that learns the provider's real limits.

`ModelWindow` (rate_window.py) is the arithmetic for one model: the requests and tokens granted in the last 60 seconds (a sliding
window, as providers count), so no 60-s window ever holds more than the allowed rate - the first minute included.
A request is granted when it is sent, never booked for later: callers wait in one first-come-first-served queue
per model (`_Queue`), and the first in line is granted as soon as the window has room and the pacing allows it. An
oversized request (more than a minute's worth) waits for an empty window and is charged what it is. What a call
really used replaces what it reserved, and wakes the queue: room freed by a call that used less than it expected
is used at once.

The allowed rate is adaptive (AIMD): its ceiling is the smaller of the configured limit and the limit the provider
announces in its `x-ratelimit-limit-*` headers; a 429 lowers it multiplicatively (a burst of 429s counts once), and
every clean stretch raises it additively back toward the ceiling. A 429 also pauses every caller of the model until
its Retry-After has passed: nobody holds a grant while waiting, so the pause holds every waiter.

Two homes for the windows and queues:
  * `RayRateLimiter` - a named async Ray actor shared by every worker on every node (index, eval, global map); a
    caller's `acquire` waits inside the actor and returns when its turn comes;
  * `LocalRateLimiter` - the same in-process, for single-process commands.
With no limit configured and none announced yet, callers do not contact the limiter at all (no cost per call).
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections import deque
from dataclasses import dataclass

from graphrag_ray.llm.rate_window import MAX_NAP_S, ModelWindow


def _resolve(future: asyncio.Future, value=None) -> None:
    """Complete a waiter's future from any thread (a local limiter may serve callers of another event loop)."""

    def done():
        if not future.done():
            future.set_result(value)

    loop = future.get_loop()
    try:
        same = asyncio.get_running_loop() is loop
    except RuntimeError:
        same = False
    if same:
        done()
    elif not loop.is_closed():
        loop.call_soon_threadsafe(done)


@dataclass(eq=False)
class _Ticket:
    prompt: int  # tokens it sends
    max_completion: int  # the most its answer may hold (0: no answer, as embeddings)
    kind: str  # what sort of request (a stage): answers of its kind tell what to expect
    granted: asyncio.Future  # the grant id, set when the ticket's turn came and it fits
    nudge: asyncio.Future  # set when the ticket became first in line or the window changed


class _Queue:
    """First come, first served for one model: only the first waiter watches the clock; a grant, a settlement,
    a pause or a learned limit wakes it to look again, and each grant hands the turn on at once."""

    def __init__(self, window: ModelWindow):
        self.window = window
        self.waiting: deque[_Ticket] = deque()

    def serve(self) -> float | None:
        """Grant the waiters at the head that fit now; seconds until the next one might (None: nobody waits)."""
        moved = False
        while self.waiting:
            head = self.waiting[0]
            if head.granted.done():  # its caller gave up (cancelled)
                self.waiting.popleft()
                moved = True
                continue
            tokens = self.window.reservation(head.prompt, head.max_completion, head.kind)
            wait = self.window.earliest(tokens)
            if wait > 0:
                if moved:  # a new first in line: it watches the clock from now on
                    _resolve(head.nudge)
                return wait
            self.waiting.popleft()
            moved = True
            _resolve(head.granted, self.window.grant(tokens))
        return None

    def nudge_head(self) -> None:
        if self.waiting:
            _resolve(self.waiting[0].nudge)

    async def acquire(self, tokens: int, max_completion: int, kind: str, lock) -> int:
        loop = asyncio.get_running_loop()
        ticket = _Ticket(tokens, max_completion, kind, loop.create_future(), loop.create_future())
        with lock:
            self.waiting.append(ticket)
        try:
            while True:
                with lock:
                    wait = self.serve()
                    if ticket.granted.done():
                        return ticket.granted.result()
                    first = self.waiting[0] is ticket
                    if ticket.nudge.done():
                        ticket.nudge = loop.create_future()
                await asyncio.wait(
                    [ticket.granted, ticket.nudge],
                    timeout=wait if first else MAX_NAP_S,
                    return_when=asyncio.FIRST_COMPLETED,
                )
        except BaseException:
            with lock:
                if ticket.granted.done() and not ticket.granted.cancelled():  # granted but never sent
                    self.window.settle(ticket.granted.result(), 0)
                ticket.granted.cancel()
                self.serve()  # the next in line may go now, or watches the clock from now on
            raise


class _Registry:
    """Windows and queues per model key; created on first use with that model's configured limits."""

    def __init__(self):
        self.queues: dict[str, _Queue] = {}
        self.answered: set[str] = set()  # models the job has had an answer from (a worker's probe went well)
        self.lock = threading.RLock()  # a local limiter may be used from more than one thread

    def __reduce__(self):  # a copy in another process is a limiter of its own: it starts empty
        return (_Registry, ())

    @property
    def windows(self) -> dict[str, ModelWindow]:
        return {k: q.window for k, q in self.queues.items()}

    def queue(self, key: str, rpm: int | None, tpm: int | None) -> _Queue:
        with self.lock:
            if key not in self.queues:
                self.queues[key] = _Queue(ModelWindow(rpm, tpm))
            return self.queues[key]

    async def acquire(
        self, key: str, tokens: int, rpm: int | None, tpm: int | None, max_completion: int = 0, kind: str = ""
    ) -> int:
        return await self.queue(key, rpm, tpm).acquire(tokens, max_completion, kind, self.lock)

    def _changed(self, key: str, change) -> None:
        with self.lock:
            if key in self.queues:
                change(self.queues[key].window)
                self.queues[key].serve()  # what fits now goes
                self.queues[key].nudge_head()  # the first still waiting recomputes its time

    def settle(self, key: str, grant: int | None, used: int, completion: int | None = None, kind: str = "") -> None:
        self._changed(key, lambda w: w.settle(grant, used, completion, kind))

    def refused(self, key: str, seconds: float, rpm: int | None, tpm: int | None) -> None:
        self.queue(key, rpm, tpm)
        self._changed(key, lambda w: w.refused(seconds))

    def learn(
        self, key: str, rpm: int | None, tpm: int | None, learned_rpm: int | None, learned_tpm: int | None
    ) -> None:
        self.queue(key, rpm, tpm)
        self._changed(key, lambda w: w.learn(learned_rpm, learned_tpm))

    def answer_seen(self, key: str) -> None:
        self.answered.add(key)

    def has_answered(self, key: str) -> bool:
        return key in self.answered

    def stats(self) -> dict:
        with self.lock:
            found = {k: {**q.window.stats(), "waiting": len(q.waiting)} for k, q in self.queues.items()}
            return {k: {**found.get(k, {}), "answered": k in self.answered} for k in sorted({*found, *self.answered})}


class _Client:
    """What a model's calls see: acquire / settle / refused / learn. Calls a model makes before any limit is known
    (none configured, none announced, no 429 yet) skip the limiter entirely."""

    def __init__(self):
        self._known: set[str] = set()  # keys whose window is limited, as far as this process has seen
        self._learned: dict[str, tuple] = {}
        self._answered: set[str] = set()  # keys the job has had an answer from, as far as this process knows

    async def acquire(
        self, key: str, tokens: int, rpm: int | None, tpm: int | None, max_completion: int = 0, kind: str = ""
    ) -> int | None:
        """Wait for the turn of a request sending `tokens` whose answer may hold up to `max_completion` (`kind`:
        its stage); returns its grant id (None: nothing is limited, the limiter is not contacted)."""
        if not (rpm or tpm or key in self._known):
            return None
        return await self._acquire(key, tokens, rpm, tpm, max_completion, kind)

    def settle(self, key: str, grant: int | None, used: int, completion: int | None = None, kind: str = "") -> None:
        if grant is not None:
            self._send("settle", key, grant, used, completion, kind)

    def refused(self, key: str, seconds: float, rpm: int | None, tpm: int | None) -> None:
        self._known.add(key)
        self._send("refused", key, seconds, rpm, tpm)

    def learn(
        self, key: str, rpm: int | None, tpm: int | None, learned_rpm: int | None, learned_tpm: int | None
    ) -> None:
        if (learned_rpm or learned_tpm) and self._learned.get(key) != (learned_rpm, learned_tpm):
            self._learned[key] = (learned_rpm, learned_tpm)
            self._known.add(key)
            self._send("learn", key, rpm, tpm, learned_rpm, learned_tpm)

    def knows_limits(self, key: str) -> bool:
        """A limit was announced for `key`, or a 429 seen, in this process: its calls are accounted."""
        return key in self._known

    def answer_seen(self, key: str) -> None:
        """A call of `key` was answered in this process: the job's other workers need not probe it (told once)."""
        if key not in self._answered:
            self._answered.add(key)
            self._send("answer_seen", key)

    async def job_has_answered(self, key: str) -> bool:
        """Whether any worker of the job has had an answer from `key` (its limits, if announced, are known); when
        the limiter cannot say, no - the worker probes, as it would have."""
        try:
            if key not in self._answered and await self._ask("has_answered", key):
                self._answered.add(key)
        except Exception:  # noqa: BLE001 - a shortcut, never a reason for a call to fail
            return False
        return key in self._answered

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_known"], state["_learned"], state["_answered"] = set(), {}, set()
        return state


class LocalRateLimiter(_Client):
    """The windows in this process (one event loop / one process)."""

    def __init__(self):
        super().__init__()
        self._registry = _Registry()

    async def _acquire(self, *args) -> int:
        return await self._registry.acquire(*args)

    def _send(self, method: str, *args) -> None:
        getattr(self._registry, method)(*args)

    async def _ask(self, method: str, *args):
        return getattr(self._registry, method)(*args)

    async def stats(self) -> dict:
        return self._registry.stats()

    def snapshot(self) -> dict:
        """The stats, from any thread (progress display)."""
        return self._registry.stats()


class LimiterActor:
    """The Ray actor body: the registry behind remote calls. An async actor: waiters wait inside it on its one
    event loop, and are woken the moment their turn comes (each other call takes microseconds)."""

    def __init__(self):
        self.registry = _Registry()

    async def acquire(
        self, key: str, tokens: int, rpm: int | None, tpm: int | None, max_completion: int = 0, kind: str = ""
    ) -> int:
        return await self.registry.acquire(key, tokens, rpm, tpm, max_completion, kind)

    async def settle(self, *args) -> None:
        self.registry.settle(*args)

    async def refused(self, *args) -> None:
        self.registry.refused(*args)

    async def learn(self, *args) -> None:
        self.registry.learn(*args)

    async def answer_seen(self, key: str) -> None:
        self.registry.answer_seen(key)

    async def has_answered(self, key: str) -> bool:
        return self.registry.has_answered(key)

    async def stats(self) -> dict:
        return self.registry.stats()


LIMITER_NAMESPACE = "graphrag_ray"


class RayRateLimiter(_Client):
    """Client side of the job-wide limiter; picklable, so it travels to every worker actor and task."""

    def __init__(self, handle):
        super().__init__()
        self._handle = handle

    @classmethod
    def for_job(cls, job_name: str) -> RayRateLimiter:
        import ray

        # every waiting call of the job is one running actor call: room for many. The name is this job's alone: an
        # earlier run of the same input in this process (or a killed driver's) left an actor of that name that
        # dies with its owner's last reference, and a run handed it would lose its limiter mid-way
        actor_cls = ray.remote(num_cpus=0, max_restarts=-1, max_concurrency=100_000)(LimiterActor)
        handle = actor_cls.options(
            name=f"limiter-{job_name}-{uuid.uuid4().hex[:8]}", namespace=LIMITER_NAMESPACE
        ).remote()
        return cls(handle)

    @classmethod
    def shared(cls, name: str) -> RayRateLimiter:
        """The limiter named `name`, made by whichever process asks first (every replica of a server asks for
        the same one): detached, so it outlives the replica that made it."""
        import ray

        actor_cls = ray.remote(num_cpus=0, max_restarts=-1, max_concurrency=100_000)(LimiterActor)
        return cls(
            actor_cls.options(name=name, namespace=LIMITER_NAMESPACE, get_if_exists=True, lifetime="detached").remote()
        )

    async def _acquire(self, *args) -> int:
        return await self._handle.acquire.remote(*args)

    def _send(self, method: str, *args) -> None:
        getattr(self._handle, method).remote(*args)  # fire and forget: nobody waits on it

    async def _ask(self, method: str, *args):
        return await getattr(self._handle, method).remote(*args)

    async def stats(self) -> dict:
        return await self._handle.stats.remote()

    def snapshot(self) -> dict:
        """The stats, from any thread (progress display)."""
        import ray

        return ray.get(self._handle.stats.remote(), timeout=5)
