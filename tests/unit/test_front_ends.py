"""What chat front ends send besides questions, routed by the ingress before any search (serve/front_ends.py): Open
WebUI's background tasks, LightRAG's `/mode` prefixes, `/v1/completions`, `response_format`. The ingress is
driven through FastAPI's test client over a backend that records what it is asked."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from graphrag_ray.serve.app import make_app
from graphrag_ray.serve.front_ends import mode_prefix, ui_task

# Open WebUI's default task templates (backend/open_webui/config.py) open and end so, the chat history inside
TITLE = (
    "### Task:\nGenerate a concise, 3-5 word title with an emoji summarizing the chat history.\n### Guidelines:\n"
    "- The title should clearly represent the main theme or subject of the conversation.\n### Output:\n"
    'JSON format: { "title": "your concise title here" }\n### Chat History:\n<chat_history>\nUSER: Who is Ada '
    "Marsh?\nASSISTANT: The lighthouse keeper.\n</chat_history>"
)
TAGS = TITLE.replace("Generate a concise, 3-5 word title", "Generate 1-3 broad tags").replace('"title"', '"tags"')
FOLLOW_UPS = TITLE.replace("Generate a concise", "Suggest 3-5 relevant follow-up questions").replace(
    '"title"', '"follow_ups"'
)


class RecordingBackend:
    indexes = ["lighthouse"]
    question_chars = {"lighthouse": 4000}

    def __init__(self):
        self.asked: list[tuple[str, str]] = []

    async def info(self, index: str) -> dict:
        return {}

    def _payload(self, method: str) -> dict:
        usage = {"llm_calls": 1, "paid_calls": 1, "prompt_tokens": 10, "output_tokens": 5, "cost": 0.0}
        return {"response": f"answered by {method}", "method": method, "sources": {}, "usage": usage, "details": {}}

    async def ask(self, target, messages, options) -> dict:
        self.asked.append((target.method, messages[-1]["content"]))
        return self._payload(target.method)

    async def stream(self, target, messages, options):
        self.asked.append((target.method, messages[-1]["content"]))
        yield {"delta": "answered "}
        yield {"delta": f"by {target.method}"}
        yield {"done": self._payload(target.method)}

    async def context(self, target, messages, options) -> dict:
        return {**self._payload(target.method), "context": {}, "context_text": ""}


def ingress(tmp_path, ui_tasks: str = "model"):
    backend = RecordingBackend()
    log = tmp_path / "requests.jsonl"
    return TestClient(make_app(backend, None, request_log=str(log), ui_tasks=ui_tasks)), backend, log


def chat(client, content: str, **body) -> dict:
    reply = client.post(
        "/v1/chat/completions",
        json={"model": "lighthouse/local", "messages": [{"role": "user", "content": content}], **body},
    )
    return {"status": reply.status_code, **reply.json()}


def test_open_webui_tasks_are_answered_by_the_model_directly_not_searched(tmp_path):
    client, backend, log = ingress(tmp_path)
    for prompt in (TITLE, TAGS, FOLLOW_UPS):
        assert chat(client, prompt)["graphrag"]["method"] == "direct"
    assert [method for method, _ in backend.asked] == ["direct"] * 3  # 0 GraphRAG searches
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["ui_task"] for line in logged] == ["title", "tags", "follow_ups"]
    assert chat(client, "Who is Ada Marsh?")["graphrag"]["method"] == "local"  # a question is searched


def test_open_webui_tasks_cost_nothing_when_skipped(tmp_path):
    client, backend, _ = ingress(tmp_path, ui_tasks="skip")
    title = chat(client, TITLE)
    assert json.loads(title["choices"][0]["message"]["content"]) == {"title": ""}
    assert json.loads(chat(client, FOLLOW_UPS)["choices"][0]["message"]["content"]) == {"follow_ups": []}
    assert backend.asked == [] and title["usage"]["total_tokens"] == 0
    ollama = client.post(
        "/api/chat",
        json={"model": "lighthouse/local", "stream": False, "messages": [{"role": "user", "content": TAGS}]},
    ).json()
    assert json.loads(ollama["message"]["content"]) == {"tags": []} and backend.asked == []


def test_lightrag_mode_prefixes_route_to_our_methods(tmp_path):
    client, backend, _ = ingress(tmp_path)
    for prefix, method in (
        ("/local", "local"),
        ("/global", "global"),
        ("/mix", "hybrid"),
        ("/naive", "basic"),
        ("/hybrid", "hybrid"),
        ("/bypass", "direct"),
    ):
        reply = client.post(
            "/api/chat",
            json={
                "model": "lighthouse/local",
                "stream": False,
                "messages": [{"role": "user", "content": f"{prefix} Who is Ada Marsh?"}],
            },
        )
        assert reply.status_code == 200, reply.text
        assert backend.asked[-1] == (method, "Who is Ada Marsh?"), prefix
    assert mode_prefix([{"role": "user", "content": "/localhost is down"}]) == (
        None,
        [{"role": "user", "content": "/localhost is down"}],
    )


def test_completions_endpoint_answers_the_prompt(tmp_path):
    client, backend, _ = ingress(tmp_path)
    reply = client.post("/v1/completions", json={"model": "lighthouse/local", "prompt": "Who is Ada Marsh?"})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["object"] == "text_completion" and body["choices"][0]["text"] == "answered by local"
    assert backend.asked[-1] == ("local", "Who is Ada Marsh?")
    streamed = client.post(
        "/v1/completions", json={"model": "lighthouse/local", "prompt": "Who is Ada Marsh?", "stream": True}
    )
    events = [line[6:] for line in streamed.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    assert "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1]) == "answered by local"


@pytest.mark.parametrize("kind", ["json_object", "json_schema"])
def test_a_structured_response_format_is_refused_with_a_400_that_says_so(tmp_path, kind):
    client, backend, _ = ingress(tmp_path)
    refused = chat(client, "Who is Ada Marsh?", response_format={"type": kind})
    assert refused["status"] == 400 and "response_format" in refused["error"]["message"]
    assert backend.asked == []
    assert chat(client, "Who is Ada Marsh?", response_format={"type": "text"})["status"] == 200


def test_ui_task_names():
    assert ui_task([{"role": "user", "content": TITLE}]) == "title"
    assert ui_task([{"role": "user", "content": "### Task: a question that merely starts so"}]) is None


class ThreeIndexes(RecordingBackend):
    indexes = ["alpha", "beta", "gamma"]
    question_chars = {"alpha": 4000, "beta": 4000, "gamma": 4000}

    async def info(self, index: str) -> dict:
        return {"version": "v1"}


def test_two_tenants_keys_over_three_indexes_with_the_openai_client(tmp_path):
    """Each key lists and answers only its indexes; the request log names the key's label, never the key."""
    import socket
    import threading
    import time

    import openai
    import uvicorn

    keys = {"key-of-a": ("alpha", ("alpha",)), "key-of-bc": ("beta+gamma", ("beta", "gamma"))}
    log = tmp_path / "requests.jsonl"
    backend = ThreeIndexes()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(make_app(backend, keys, request_log=str(log)), host="127.0.0.1", port=port, log_level="error")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:

        def tenant(key: str) -> openai.OpenAI:
            return openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key, max_retries=0)

        a, bc = tenant("key-of-a"), tenant("key-of-bc")
        assert {m.id.split("/")[0] for m in a.models.list().data if "/" in m.id} == {"alpha"}
        assert {m.id.split("/")[0] for m in bc.models.list().data} == {"beta", "gamma", "all"}
        question = [{"role": "user", "content": "Who is Ada Marsh?"}]
        assert a.chat.completions.create(model="alpha/local", messages=question).choices[0].message.content
        for model in ("beta/local", "gamma/global", "alpha+beta/local"):
            with pytest.raises(openai.NotFoundError):
                a.chat.completions.create(model=model, messages=question)
        alone = a.chat.completions.create(model="all/global", messages=question)  # all: every index the key sees
        assert alone.model_extra["graphrag"]["indexes"] == ["alpha"]
        with pytest.raises(openai.NotFoundError):
            bc.chat.completions.create(model="alpha/local", messages=question)
        answered = bc.chat.completions.create(model="all/global", messages=question)
        assert answered.model_extra["graphrag"]["indexes"] == ["beta", "gamma"]  # all = the key's indexes
        with pytest.raises(openai.AuthenticationError):
            tenant("key-of-nobody").models.list()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    text = log.read_text()
    assert "key-of-" not in text
    labels = {json.loads(line).get("key") for line in text.splitlines()}
    assert {"alpha", "beta+gamma"} <= labels


def test_tenant_keys_come_from_each_served_root_s_settings(tmp_path, monkeypatch):
    import yaml

    from graphrag_ray.serve.deploy import tenant_keys

    monkeypatch.delenv("GRAPHRAG_SERVE_API_KEY", raising=False)
    roots = {}
    for name, key in (("alpha", "key-of-a"), ("beta", "key-of-bc"), ("gamma", "key-of-bc"), ("delta", None)):
        root = tmp_path / name
        root.mkdir()
        (root / "settings.yaml").write_text(yaml.safe_dump({"serve": {"api_key": key}} if key else {}))
        roots[name] = str(root)
    keys = tenant_keys(roots, admin="admin-key")
    assert keys == {
        "key-of-a": ("alpha", ("alpha",)),
        "key-of-bc": ("beta+gamma", ("beta", "gamma")),
        "admin-key": ("server", ("alpha", "beta", "gamma", "delta")),  # delta has no key: the admin's only
    }
    assert tenant_keys({"alpha": roots["alpha"], "delta": roots["delta"]}, None) is None  # one key: for all
