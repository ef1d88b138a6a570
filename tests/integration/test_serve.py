"""`graphrag-ray serve` driven by real clients - the official openai SDK and the ollama library - over two
indexes built on the simulator (a Chinese coffee shop, an English lighthouse), served at once on Ray Serve."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import ollama
import openai
import pytest
import yaml

from graphrag_ray import api
from graphrag_ray.simulate.process import SimulatorProcess
from tests.helpers import make_root
from tests.integration.test_index import coffee_root

pytestmark = pytest.mark.slow  # servers and processes of their own: `-m "not slow"` leaves them out

KEY = "serve-test-key-3f9a"
LIGHTHOUSE = Path(__file__).parents[1] / "data" / "lighthouse.csv"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def set_serve(root: Path, **serve) -> None:
    settings = yaml.safe_load((root / "settings.yaml").read_text(encoding="utf-8"))
    settings["serve"] = {**settings.get("serve", {}), **serve}
    (root / "settings.yaml").write_text(yaml.safe_dump(settings, allow_unicode=True), encoding="utf-8")


@pytest.fixture(scope="module")
def served(tmp_path_factory, ray_session):
    from ray import serve

    from graphrag_ray.serve.deploy import run_server, stop_server

    tmp = tmp_path_factory.mktemp("serve")
    with SimulatorProcess() as sim:
        coffee = coffee_root(tmp / "coffee_shop", sim.base_url)
        lighthouse = make_root(tmp / "lighthouse", sim.base_url)
        (lighthouse / "input").mkdir()
        shutil.copy(LIGHTHOUSE, lighthouse / "input" / "lighthouse.csv")
        for root in (coffee, lighthouse):
            set_serve(root, reload_check_s=0.1, replica_cpus=0.25)
            api.build_index(root=root)
        (coffee / ".env").write_text((coffee / ".env").read_text() + f"GRAPHRAG_SERVE_API_KEY={KEY}\n")
        set_serve(coffee, api_key="${GRAPHRAG_SERVE_API_KEY}")  # the first root's key guards the server
        port, log = free_port(), tmp / "requests.jsonl"
        url = run_server(
            [str(coffee), str(lighthouse)], port=port, request_log=str(log), say=lambda line: None, block=False
        )
        try:
            yield {"url": url, "coffee": coffee, "lighthouse": lighthouse, "log": log, "sim": sim}
        finally:
            stop_server()
            serve.shutdown()


def client(served, key: str = KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=served["url"] + "/v1", api_key=key, max_retries=0)


def ask(served, model: str, question: str, **kw):
    return client(served).chat.completions.create(model=model, messages=[{"role": "user", "content": question}], **kw)


def test_openai_sdk_models_chat_and_stream(served):
    names = [m.id for m in client(served).models.list().data]
    assert {
        "coffee_shop/local",
        "coffee_shop/global",
        "lighthouse/basic",
        "lighthouse/drift",
        "all/global",
        "all/local",
    } <= set(names)

    light = ask(served, "lighthouse/local", "Who is Ada Marsh?")
    text = light.choices[0].message.content
    assert "Ada Marsh" in text and "[Data:" in text and "李明" not in text
    extension = light.model_extra["graphrag"]
    assert extension["indexes"] == ["lighthouse"] and extension["method"] == "local"
    assert extension["sources"]["sources"] and extension["llm_calls"] >= 1
    coffee = ask(served, "coffee_shop/local", "李明的咖啡店开在哪里？")
    assert "李明" in coffee.choices[0].message.content and "Ada" not in coffee.choices[0].message.content

    # the conversation so far travels with the question; a stream with usage ends with a usage chunk
    stream = client(served).chat.completions.create(
        model="lighthouse/global",
        stream=True,
        stream_options={"include_usage": True},
        messages=[
            {"role": "user", "content": "Who is Ada Marsh?"},
            {"role": "assistant", "content": text},
            {"role": "user", "content": "What happened at the Gull Island Lighthouse in the storm?"},
        ],
    )
    pieces, usage, final = [], None, None
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
        if chunk.choices and chunk.choices[0].finish_reason == "stop":
            final = chunk.model_extra["graphrag"]
        if chunk.usage:
            usage = chunk.usage
    answer = "".join(pieces)
    assert "Gull Island" in answer and len(pieces) > 1
    assert final["method"] == "global" and final["details"]["map_calls"] >= 1
    assert usage is not None and usage.prompt_tokens > 0 and usage.completion_tokens > 0

    # request options as extra body fields; the single-index short names
    level0 = ask(
        served,
        "lighthouse/global",
        "What happened at the Gull Island Lighthouse?",
        extra_body={"community_level": 0, "response_type": "Single Sentence"},
    )
    assert level0.model_extra["graphrag"]["sources"]["reports"]


def test_errors_are_one_line_in_openai_shape(served):
    with pytest.raises(openai.NotFoundError) as missing:
        ask(served, "nowhere/local", "Who is Ada Marsh?")
    assert "no index named 'nowhere'" in str(missing.value) and "coffee_shop, lighthouse" in str(missing.value)
    with pytest.raises(openai.BadRequestError) as empty:
        ask(served, "lighthouse/local", "   ")
    assert "empty query" in str(empty.value) and "Traceback" not in str(empty.value)
    with pytest.raises(openai.BadRequestError) as several:
        ask(served, "all/drift", "Who is Ada Marsh?")
    assert "several indexes are asked with global or local" in str(several.value)


def test_the_api_key_is_required_and_never_written(served):
    with pytest.raises(openai.AuthenticationError):
        client(served, key="wrong").models.list()
    request = urllib.request.Request(served["url"] + "/v1/models")
    with pytest.raises(urllib.error.HTTPError) as bare:
        urllib.request.urlopen(request, timeout=10)
    assert bare.value.code == 401 and json.loads(bare.value.read())["error"]["code"] == "invalid_api_key"
    with urllib.request.urlopen(served["url"] + "/health", timeout=30) as health:  # probes need no key
        assert json.loads(health.read())["status"] == "ok"
    ask(served, "lighthouse/basic", "Tell me about the Fresnel lens")
    lines = [json.loads(line) for line in served["log"].read_text().splitlines()]
    assert any(line["status"] == 401 for line in lines)
    answered = [line for line in lines if line.get("method") == "basic"]
    assert answered and {"index", "llm_calls", "prompt_tokens", "cost", "latency_s"} <= set(answered[-1])
    from ray._private.worker import global_worker

    logs = Path(global_worker.node.get_session_dir_path()) / "logs"
    leaked = [p for p in [served["log"], *logs.rglob("*")] if p.is_file() and KEY.encode() in p.read_bytes()]
    assert not leaked, leaked


def test_ollama_client_tags_chat_stream_and_generate(served):
    o = ollama.Client(host=served["url"], headers={"Authorization": f"Bearer {KEY}"})
    request = urllib.request.Request(served["url"] + "/api/version", headers={"Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(request, timeout=10) as version:  # Open WebUI asks it
        assert json.loads(version.read())["version"]
    tags = [m.model for m in o.list().models]
    assert "lighthouse/local:latest" in tags and "coffee_shop/global:latest" in tags
    reply = o.chat(
        model="lighthouse/local:latest", messages=[{"role": "user", "content": "Who is Tom Marsh?"}], stream=False
    )
    assert "Tom Marsh" in reply.message.content and reply.done
    pieces = list(
        o.chat(
            model="lighthouse/local",
            stream=True,
            messages=[{"role": "user", "content": "Who wired the electric lamp?"}],
        )
    )
    assert len(pieces) > 2 and pieces[-1].done and not any(p.done for p in pieces[:-1])
    assert "lamp" in "".join(p.message.content for p in pieces) and pieces[-1].eval_count >= 0
    generated = o.generate(model="coffee_shop/local", prompt="李明的咖啡店卖什么？", stream=False)
    assert "李明" in generated.response or "拿铁" in generated.response
    with pytest.raises(ollama.ResponseError):
        o.chat(model="nowhere/local", messages=[{"role": "user", "content": "x"}], stream=False)


def test_a_question_asked_of_both_indexes(served):
    question = "Who kept the Gull Island Lighthouse, and where did 李明 open the 咖啡店?"
    both = ask(served, "all/global", question)
    text, extension = both.choices[0].message.content, both.model_extra["graphrag"]
    cited = text.split("[Data:", 1)[1] if "[Data:" in text else ""
    assert "coffee_shop:" in cited and "lighthouse:" in cited, text
    assert {r.split(":")[0] for r in extension["sources"]["reports"]} == {"coffee_shop", "lighthouse"}
    assert extension["details"]["map_calls"] >= 2 and extension["llm_calls"] >= 3  # maps in both, one reduce
    local = ask(served, "coffee_shop+lighthouse/local", question)
    sources = local.model_extra["graphrag"]["sources"]
    assert {s.split(":")[0] for s in sources["sources"]} == {"coffee_shop", "lighthouse"}
    # the same question on the command line, one process
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "graphrag_ray.cli",
            "query",
            "--root",
            str(served["coffee"]),
            "--root",
            str(served["lighthouse"]),
            "--method",
            "global",
            question,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "coffee_shop:" in done.stdout and "lighthouse:" in done.stdout


def test_retrieval_only_returns_the_context_and_makes_no_answer_call(served):
    body = json.dumps({"model": "lighthouse/local", "query": "Who is Ada Marsh?"}).encode()
    request = urllib.request.Request(
        served["url"] + "/v1/context",
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        found = json.loads(reply.read())
    assert found["usage"]["output_tokens"] == 0  # no chat call (at most the question's embedding)
    titles = [e["entity"] for e in found["context"]["entities"]]
    assert "ADA MARSH" in titles and found["context"]["sources"]
    assert "-----Entities-----" in found["context_text"]


def test_an_update_published_while_a_client_streams(served):
    root = served["lighthouse"]
    stream = client(served).chat.completions.create(
        model="lighthouse/local", stream=True, messages=[{"role": "user", "content": "Who is Ada Marsh?"}]
    )
    first = next(iter(stream))
    failures, stop = [], threading.Event()

    def keep_asking():  # questions beside the update: none may fail
        while not stop.is_set():
            try:
                ask(served, "lighthouse/basic", "Tell me about the Port Winter Maritime Museum")
            except Exception as exc:  # noqa: BLE001 - collected and asserted below
                failures.append(exc)

    beside = threading.Thread(target=keep_asking)
    beside.start()
    try:
        with (root / "input" / "lighthouse.csv").open("a", encoding="utf-8") as csv:
            csv.write(
                'l4,The new keeper,"In 1962 Nora Quill became the last keeper of the Gull Island '
                'Lighthouse before the light was automated in 1971."\n'
            )
        result = api.update_index(root=root)
        assert result.index is not None
        rest = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        time.sleep(0.5)  # past serve.reload_check_s
    finally:
        stop.set()
        beside.join()
    assert "Ada Marsh" in (first.choices[0].delta.content or "") + rest
    assert not failures, failures[:3]
    after = ask(served, "lighthouse/local", "Who is Nora Quill?").choices[0].message.content
    assert "Nora Quill" in after


def test_a_full_queue_answers_429_with_retry_after(served, tmp_path):
    """One replica taking one question at a time and queueing one more, behind a model that takes 2 s: a burst
    gets 429 + Retry-After beyond them, and the rest are answered."""
    from ray import serve

    from graphrag_ray.serve.deploy import build_app, stop_server

    with SimulatorProcess(latency=2.0) as slow:
        root = tmp_path / "busy"
        shutil.copytree(served["lighthouse"], root, ignore=shutil.ignore_patterns("cache"))
        settings = yaml.safe_load((root / "settings.yaml").read_text(encoding="utf-8"))
        for model in settings["models"].values():
            model["api_base"] = slow.base_url
        settings["serve"] = {
            "name": "busy",
            "max_ongoing_requests": 1,
            "max_queued_requests": 1,
            "retry_after_s": 3,
            "replica_cpus": 0.25,
        }
        (root / "settings.yaml").write_text(yaml.safe_dump(settings, allow_unicode=True), encoding="utf-8")
        serve.run(build_app({"roots": [str(root)], "name": "busy"}), name="busy", route_prefix="/busy")
        try:
            statuses, retry = [], []

            def one(i: int):
                body = json.dumps(
                    {"model": "local", "messages": [{"role": "user", "content": f"Who is Ada Marsh? ({i})"}]}
                ).encode()
                request = urllib.request.Request(
                    served["url"] + "/busy/v1/chat/completions",
                    data=body,
                    method="POST",
                    headers={"Content-Type": "application/json"},
                )
                try:
                    with urllib.request.urlopen(request, timeout=60) as reply:
                        statuses.append(reply.status)
                except urllib.error.HTTPError as exc:
                    statuses.append(exc.code)
                    retry.append(exc.headers.get("Retry-After"))

            threads = [threading.Thread(target=one, args=(i,)) for i in range(5)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            stop_server("busy")
    assert statuses.count(200) >= 1 and statuses.count(429) >= 1, statuses
    assert set(statuses) <= {200, 429} and set(retry) == {"3"}, (statuses, retry)


def test_serve_names_a_missing_index_in_one_line(tmp_path):
    root = make_root(tmp_path / "empty", "http://127.0.0.1:9/v1")
    done = subprocess.run(
        [sys.executable, "-m", "graphrag_ray.cli", "serve", "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: no index at"), done.stderr


def raw_post(url: str, path: str, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(
        url + path, data=body, headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def serve_tracebacks() -> int:
    from ray._private.worker import global_worker

    logs = Path(global_worker.node.get_session_dir_path()) / "logs"
    return sum(p.read_text(errors="replace").count("Traceback") for p in logs.rglob("*.log") if p.is_file())


def test_malformed_requests_get_400_or_413_in_their_protocols_shape_and_no_traceback(served):
    url, question = served["url"], {"role": "user", "content": "Who keeps the lighthouse?"}
    ok = {"model": "lighthouse/basic", "messages": [question]}
    cases = {
        "not JSON": (b"{not json", 400),
        "a list": (b"[1, 2]", 400),
        "messages as a string": (json.dumps({**ok, "messages": "hi"}).encode(), 400),
        "community_level abc": (json.dumps({**ok, "community_level": "abc"}).encode(), 400),
        "a 5,000-character question": (
            json.dumps({**ok, "messages": [{"role": "user", "content": "why " * 1250}]}).encode(),
            400,
        ),
        "a 95 KB response_type": (json.dumps({**ok, "response_type": "x" * 95_000}).encode(), 400),
        "a 10,000-character model": (json.dumps({**ok, "model": "m" * 10_000}).encode(), 400),
        "a 2 MB body": (json.dumps({**ok, "padding": "p" * 2_000_000}).encode(), 413),
    }
    before = serve_tracebacks()
    for name, (body, status) in cases.items():
        for path in ("/v1/chat/completions", "/api/chat"):
            got, reply = raw_post(url, path, body)
            assert got == status, (name, path, got, reply)
            message = reply["error"] if path.startswith("/api/") else reply["error"]["message"]
            assert isinstance(message, str) and 0 < len(message) < 300, (name, path, reply)
            assert "Traceback" not in message and "m" * 100 not in message and "x" * 100 not in message
    assert serve_tracebacks() == before  # a client's mistake is no error of ours: nothing in the logs
    with pytest.raises(openai.BadRequestError):  # the real clients raise their own errors
        client(served).chat.completions.create(model="lighthouse/basic", messages="hi")
    with pytest.raises(openai.BadRequestError):
        ask(served, "lighthouse/basic", "Who keeps it?", extra_body={"response_type": "x" * 95_000})
    o = ollama.Client(host=url, headers={"Authorization": f"Bearer {KEY}"})
    with pytest.raises(ollama.ResponseError) as refused:
        o.chat(model="lighthouse/basic", messages=[{"role": "user", "content": "why " * 1250}])
    assert refused.value.status_code == 400


def test_a_question_to_a_silent_endpoint_gets_502_within_the_deadline(served, tmp_path):
    """A model endpoint that accepts the connection and never answers: the served question ends within
    query.deadline_s + 5 s with a 502 naming the endpoint."""
    from ray import serve

    from graphrag_ray.serve.deploy import build_app, stop_server
    from tests.reliability.test_silent_endpoint import silent_endpoint

    with silent_endpoint() as url:
        root = tmp_path / "silent"
        shutil.copytree(served["lighthouse"], root, ignore=shutil.ignore_patterns("cache"))
        settings = yaml.safe_load((root / "settings.yaml").read_text(encoding="utf-8"))
        settings["models"]["default_chat"]["api_base"] = url
        settings["query"] = {"deadline_s": 8}
        settings["serve"] = {"name": "silent", "replica_cpus": 0.25}
        (root / "settings.yaml").write_text(yaml.safe_dump(settings, allow_unicode=True), encoding="utf-8")
        serve.run(build_app({"roots": [str(root)], "name": "silent"}), name="silent", route_prefix="/silent")
        try:
            body = json.dumps({"model": "basic", "messages": [{"role": "user", "content": "Who keeps it?"}]})
            started = time.monotonic()
            status, reply = raw_post(served["url"] + "/silent", "/v1/chat/completions", body.encode())
            took = time.monotonic() - started
        finally:
            stop_server("silent")
    assert status == 502 and took <= 8 + 5, (status, took, reply)
    assert url in reply["error"]["message"] and "query.deadline_s" in reply["error"]["message"], reply


def test_front_ends_tasks_prefixes_and_the_completions_endpoint_through_ray_serve(served):
    """Open WebUI's title task is answered by the index's chat model directly (no search), LightRAG's `/local`
    prefix routes, and the openai client's completions.create reads /v1/completions."""
    from tests.unit.test_front_ends import TITLE

    sim = served["sim"]
    before = sim.stats()
    titled = ask(served, "lighthouse/local", TITLE)
    assert titled.model_extra["graphrag"]["method"] == "direct" and titled.choices[0].message.content
    after = sim.stats()
    searches = [k for k in after if k.startswith("kind_query_") and after[k] != before.get(k)]
    assert searches == [], searches  # one chat call, no search's calls
    logged = [json.loads(line) for line in served["log"].read_text().splitlines()]
    assert logged[-1]["ui_task"] == "title"
    local = ollama.Client(host=served["url"], headers={"Authorization": f"Bearer {KEY}"}).chat(
        model="lighthouse/global", messages=[{"role": "user", "content": "/local Who is Ada Marsh?"}]
    )
    assert "Ada Marsh" in local.message.content
    completed = client(served).completions.create(model="lighthouse/local", prompt="Who is Ada Marsh?")
    assert "Ada Marsh" in completed.choices[0].text


def test_a_served_question_increments_serve_s_ray_metrics(served):
    from tests.integration.test_metrics import scrape

    before = scrape().get("ray_graphrag_ray_serve_requests_total", 0.0)
    ask(served, "lighthouse/basic", "Who is Ada Marsh?")
    deadline = time.time() + 90
    while time.time() < deadline and scrape().get("ray_graphrag_ray_serve_requests_total", 0.0) <= before:
        time.sleep(2)
    assert scrape().get("ray_graphrag_ray_serve_requests_total", 0.0) > before
    assert scrape().get("ray_graphrag_ray_serve_latency_s_count", 0.0) > 0
