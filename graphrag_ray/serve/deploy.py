"""`graphrag-ray serve` on Ray Serve: one deployment per index (its own replicas, tables loaded once per replica),
one HTTP ingress (serve/app.py) in front of them, and one rate limiter every replica on every node reserves from.

`build_app({"roots": [...]})` is the application builder `serve deploy` / KubeRay's RayService import
(`import_path: graphrag_ray.serve.deploy:build_app`); `run_server` is the command.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ray import serve

from graphrag_ray.config.load import load_settings
from graphrag_ray.errors import UsageError
from graphrag_ray.exec.runtime import serve_replicas_on_loopback
from graphrag_ray.query.context.history import ConversationHistory
from graphrag_ray.query.multi import index_name
from graphrag_ray.serve.app import make_app
from graphrag_ray.serve.index_service import IndexService
from graphrag_ray.serve.protocol import Busy, Target

log = logging.getLogger(__name__)
APP_NAME = "graphrag"
serve_replicas_on_loopback()  # this module is what a replica imports first: before it binds its gRPC port


def limiter_name(app_name: str) -> str:
    return f"limiter-serve-{app_name}"


@serve.deployment
class IndexDeployment:
    """One index's replica: the IndexService's methods, callable through a deployment handle."""

    def __init__(self, root: str, app_name: str = APP_NAME):
        from graphrag_ray.llm.ratelimit import RayRateLimiter

        self.service = IndexService(root, RayRateLimiter.shared(limiter_name(app_name)))

    async def info(self) -> dict:
        return await self.service.info()

    async def ask(self, method: str, messages: list[dict], options: dict, others: list | None = None) -> dict:
        return await self.service.ask(method, messages, options, parts(others))

    async def stream(
        self, method: str, messages: list[dict], options: dict, others: list | None = None
    ) -> AsyncIterator[dict]:
        async for piece in self.service.stream(method, messages, options, parts(others)):
            yield piece

    async def context(self, method: str, messages: list[dict], options: dict, others: list | None = None) -> dict:
        return await self.service.context(method, messages, options, parts(others))

    # a part of another replica's question: what it costs here goes back with it, into that question's usage
    async def points(self, question: str, options: dict):
        return await spent(self.service.points(question, options))

    async def local_context(self, question: str, history: ConversationHistory | None, options: dict):
        return await spent(self.service.local_context(question, history, options))

    async def report_batches(self, question: str, options: dict):
        return await spent(self.service.report_batches(question, options))


async def spent(work) -> tuple[Any, dict]:
    """(what `work` returns, the usage it recorded)."""
    from graphrag_ray.llm.ledger import UsageLedger, recording_into

    with recording_into(UsageLedger(), roll_up=False) as ledger:
        return await work, ledger.to_dict()


async def merged(response) -> Any:
    """A part's result, its usage merged into the question's own ledger."""
    from graphrag_ray.llm.ledger import active_ledger

    value, usage = await response
    ledger = active_ledger(None)
    if ledger is not None:
        ledger.merge(usage)
    return value


@dataclass
class HandlePart:
    """Another index of a multi-index question, asked through its deployment (query/multi.py's IndexPart)."""

    name: str
    handle: Any
    options: dict

    async def points(self, query: str):
        return await merged(self.handle.points.remote(query, self.options))

    async def local_context(self, query: str, history: ConversationHistory | None):
        return await merged(self.handle.local_context.remote(query, history, self.options))

    async def report_batches(self, query: str):
        return await merged(self.handle.report_batches.remote(query, self.options))


def parts(others: list | None) -> list[HandlePart]:
    return [HandlePart(name, handle, options) for name, handle, options in others or []]


class HandleBackend:
    """serve/app.py's backend over the index deployments' handles; a full queue becomes Busy (429)."""

    def __init__(self, handles: dict[str, Any], retry_after: int, question_chars: dict[str, int] | None = None):
        self.handles, self.indexes, self.retry_after = handles, list(handles), retry_after
        self.question_chars = question_chars or {}

    def _call(self, target: Target, options: dict, stream: bool = False):
        """(handle of the index that answers, the others as (name, handle, options))."""
        first, *rest = target.indexes
        handle = self.handles[first].options(stream=True) if stream else self.handles[first]
        return handle, [(name, self.handles[name], options) for name in rest]

    async def _awaited(self, response):
        from ray.serve.exceptions import BackPressureError

        try:
            return await response
        except BackPressureError:
            raise Busy(self.retry_after) from None

    async def info(self, index: str) -> dict:
        return await self._awaited(self.handles[index].info.remote())

    async def ask(self, target: Target, messages: list[dict], options: dict) -> dict:
        handle, others = self._call(target, options)
        return await self._awaited(handle.ask.remote(target.method, messages, options, others))

    async def context(self, target: Target, messages: list[dict], options: dict) -> dict:
        handle, others = self._call(target, options)
        return await self._awaited(handle.context.remote(target.method, messages, options, others))

    async def stream(self, target: Target, messages: list[dict], options: dict) -> AsyncIterator[dict]:
        from ray.serve.exceptions import BackPressureError

        handle, others = self._call(target, options, stream=True)
        pieces = handle.stream.remote(target.method, messages, options, others)
        try:
            async for piece in pieces:
                yield piece
        except BackPressureError:
            raise Busy(self.retry_after) from None


@serve.deployment(ray_actor_options={"num_cpus": 0.1}, max_ongoing_requests=1000)
@serve.ingress()
class Ingress:
    """The HTTP ingress: routes every request to the deployments of the indexes its model names."""

    def __init__(
        self,
        handles: dict[str, Any],
        key_root: str,
        request_log: str | None,
        app_name: str = APP_NAME,
        question_chars: dict[str, int] | None = None,
        roots: dict[str, str] | None = None,
    ):
        # the key is never an argument (Ray Serve keeps those in its application state): the one `serve` was given
        # is handed over in the cluster's key-value store; otherwise (`serve deploy`, KubeRay) the first root's
        # settings (.env included) or the replica's environment
        settings = load_settings(key_root)
        handed = handed_key(app_name)
        self.api_key = (
            tenant_keys(roots or {}, handed)
            or handed
            or (settings.serve.api_key.get_secret_value() if settings.serve.api_key else None)
        )
        self.serve, self.request_log = settings.serve, request_log
        self.backend = HandleBackend(handles, settings.serve.retry_after_s, question_chars)

    def __serve_build_asgi_app__(self):
        limits = self.serve
        return make_app(
            self.backend,
            self.api_key,
            limits.retry_after_s,
            self.request_log,
            max_body_bytes=limits.max_body_bytes,
            max_field_chars=limits.max_field_chars,
            ui_tasks=limits.ui_tasks,
        )


def tenant_keys(roots: dict[str, str], admin: str | None) -> dict[str, tuple[str, tuple[str, ...]]] | None:
    """Several tenants behind one server: when two or more served roots set `serve.api_key`, each key sees and
    queries the indexes whose settings name it (its label in the request log: their names); the key `serve` was
    given, or GRAPHRAG_SERVE_API_KEY, sees every index. None when at most one root sets a key (one key for all)."""
    import os

    named: dict[str, list[str]] = {}
    for index, root in roots.items():
        key = load_settings(root).serve.api_key
        if key is not None and key.get_secret_value():
            named.setdefault(key.get_secret_value(), []).append(index)
    if sum(len(v) for v in named.values()) < 2:
        return None
    keys = {key: ("+".join(indexes), tuple(indexes)) for key, indexes in named.items()}
    admin = admin or os.environ.get("GRAPHRAG_SERVE_API_KEY")
    if admin:
        keys[admin] = ("server", tuple(roots))
    return keys


def build_app(args: dict):
    """The application: `roots` (a list of project roots); optional `request_log` (a JSON-lines file) and `name`
    (the application's, naming its limiter). The API key is the first root's serve.api_key or
    GRAPHRAG_SERVE_API_KEY. Each index's replicas and queue come from its own settings' serve section."""
    roots = [str(Path(r).resolve()) for r in args.get("roots") or []]
    if not roots:
        raise UsageError("serve: give at least one --root (or `roots:` in the application's args)")
    app_name = args.get("name", APP_NAME)
    handles, question_chars, by_index = {}, {}, {}
    for root in roots:
        settings = load_settings(root)
        name = index_name(root, settings)
        if name in handles:
            raise UsageError(f"two served indexes are both named {name!r}: set serve.name in one's settings.yaml")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise UsageError(f"index name {name!r}: use letters, digits, '_', '.', '-' (serve.name)")
        cfg = settings.serve
        # Ray Serve hands a replica its whole queue (IndexService.turn keeps it). Its caller-side queue (which
        # also holds every request while it is being routed) is bounded the same; beyond it, Busy: 429
        deployment = IndexDeployment.options(
            name=f"index-{name}",
            num_replicas=cfg.replicas,
            max_ongoing_requests=cfg.max_ongoing_requests + cfg.max_queued_requests,
            max_queued_requests=cfg.max_queued_requests,
            ray_actor_options={"num_cpus": cfg.replica_cpus},
        )
        handles[name] = deployment.bind(root, app_name)
        question_chars[name] = settings.query.max_question_chars
        by_index[name] = root
    return Ingress.bind(handles, roots[0], args.get("request_log"), app_name, question_chars, by_index)


KEY_NAMESPACE = "graphrag-serve"


def hand_key(app_name: str, key: str | None) -> None:
    """The API key the command was given, for its ingress replicas to read (wherever they run: on a joined
    cluster their environment is the cluster's, not the command's). None: whatever an earlier run left, removed."""
    from ray.experimental.internal_kv import _internal_kv_del, _internal_kv_put

    if key:
        _internal_kv_put(f"key-{app_name}", key.encode(), overwrite=True, namespace=KEY_NAMESPACE)
    else:
        _internal_kv_del(f"key-{app_name}", namespace=KEY_NAMESPACE)


def handed_key(app_name: str) -> str | None:
    from ray.experimental.internal_kv import _internal_kv_get

    value = _internal_kv_get(f"key-{app_name}", namespace=KEY_NAMESPACE)
    return value.decode() if value else None


def run_server(
    roots: list[str],
    host: str = "127.0.0.1",
    port: int = 8000,
    request_log: str | None = None,
    verbose: bool = False,
    say=print,
    block: bool = True,
    proxy_location: str = "HeadOnly",
    address: str | None = None,
) -> str:
    """Serve the indexes at ROOTS until Ctrl-C or SIGTERM, on the Ray cluster `address` or RAY_ADDRESS names, or
    on one of its own (loopback only); returns the base URL (at once with block=False)."""
    import os
    import signal
    import time

    import ray

    from graphrag_ray.exec.runtime import ensure_ray, where_ray_runs

    settings = [load_settings(root) for root in roots]
    for root, s in zip(roots, settings):  # a missing index is said now, not on the first question
        from graphrag_ray.query.index_data import read_index_tables
        from graphrag_ray.storage.location import resolve

        read_index_tables(resolve(root, s.output.base_dir), ())
    ensure_ray(verbose, address)  # a cluster named by --address / RAY_ADDRESS, or one of its own on loopback
    say(where_ray_runs())
    # HeadOnly: one address, the one printed (several nodes on one host would each bind the port); a cluster
    # whose clients reach every node runs cluster/serve.yaml with EveryNode
    key = settings[0].serve.api_key.get_secret_value() if settings[0].serve.api_key else None
    hand_key(APP_NAME, key or os.environ.get("GRAPHRAG_SERVE_API_KEY") or None)
    serve.start(proxy_location=proxy_location, http_options={"host": host, "port": port})
    serve.run(build_app({"roots": roots, "request_log": request_log}), name=APP_NAME, route_prefix="/")
    url = f"http://{host}:{port}"
    names = [index_name(root, s) for root, s in zip(roots, settings)]
    say(
        f"serving {', '.join(names)} at {url} (OpenAI: {url}/v1, Ollama: {url}); models: "
        + ", ".join(f"{n}/local" for n in names)
        + ", ... (GET /v1/models lists them)"
    )
    if not (settings[0].serve.api_key or os.environ.get("GRAPHRAG_SERVE_API_KEY")):
        say(
            "warning: no API key (serve.api_key / GRAPHRAG_SERVE_API_KEY): anyone who reaches "
            f"{host}:{port} can query and spend model tokens"
        )
    if not block:
        return url

    def terminated(signum, frame):  # SIGTERM (a service manager, `kill`) stops it as Ctrl-C does
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminated)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        say("stopping")
    finally:
        stop_server()
        if ray.is_initialized():
            ray.shutdown()
    return url


def stop_server(app_name: str = APP_NAME) -> None:
    """The application and its limiter gone (the limiter is detached: it would outlive the server)."""
    import ray

    from graphrag_ray.llm.ratelimit import LIMITER_NAMESPACE

    serve.delete(app_name)
    hand_key(app_name, None)
    try:
        ray.kill(ray.get_actor(limiter_name(app_name), namespace=LIMITER_NAMESPACE))
    except ValueError:  # never made: no request reached a replica
        pass
