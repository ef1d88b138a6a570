"""The LLM layer against the simulator: retries, ledger vs server counts, cache, streaming, JSON, 401, secrets."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graphrag_ray.errors import LLMFatalError
from graphrag_ray.llm.model import ChatResult
from graphrag_ray.llm.models import Models
from graphrag_ray.simulate.process import SimulatorProcess
from tests.helpers import TEST_KEY, files_containing, make_root, settings_for


def _models(root: Path) -> Models:
    return Models.create(settings_for(root), root)


def _ask(i: int) -> list[dict]:
    return [{"role": "user", "content": f"Question {i}: 李明在杭州开了一家咖啡店。Who opened the coffee shop {i}?"}]


async def _run_batch(models: Models, n: int, model_id: str = "default_chat") -> list[ChatResult]:
    chat = models.chat(model_id)
    return await asyncio.gather(*(chat.chat(_ask(i), stage="batch") for i in range(n)))


def test_batch_survives_429s_and_5xx_and_ledger_matches_server(tmp_path):
    with SimulatorProcess(fault_429=0.20, fault_500=0.05, fault_503=0.05, retry_after=0.02, seed=7) as sim:
        root = make_root(tmp_path / "p", sim.base_url, cache={"enabled": False})
        models = _models(root)
        results = models.run(_run_batch(models, 500))
        server = sim.stats()
    assert len(results) == 500 and all(r.content for r in results)
    total = models.ledger.total("batch")
    assert server["fault_429"] > 50 and server["fault_500"] + server["fault_503"] > 20  # faults really happened
    assert total.calls == server["ok"] == 500
    assert total.prompt_tokens == server["prompt_tokens"]
    assert total.completion_tokens == server["completion_tokens"]
    assert total.rate_limited == server["fault_429"] + server["fault_503"]  # a 503 with Retry-After waits like a 429
    assert total.retries == server["fault_429"] + server["fault_500"] + server["fault_503"]
    assert total.failures == 0 and total.cost > 0


def test_second_run_is_free_and_changing_the_model_pays_again(tmp_path, simulator):
    root = make_root(tmp_path / "p", simulator.base_url)
    simulator.reset()
    first_models = _models(root)
    first = first_models.run(_run_batch(first_models, 30))
    assert simulator.stats()["ok"] == 30
    again = _models(root)
    second = again.run(_run_batch(again, 30))
    assert simulator.stats()["ok"] == 30, "an identical re-run must make zero calls"
    assert [r.content for r in first] == [r.content for r in second]
    assert again.ledger.total().calls == 0 and again.ledger.total().cache_hits == 30
    other = _models(root)
    other.settings.models["default_chat"].model = "gpt-4.1-mini"
    other.run(_run_batch(other, 30))
    assert simulator.stats()["ok"] == 60, "the model name is part of the cache key"


def test_streaming_arrives_in_chunks_and_matches_the_plain_answer(tmp_path, simulator):
    root = make_root(tmp_path / "p", simulator.base_url, cache={"enabled": False})
    models = _models(root)
    chat = models.chat("default_chat")
    plain = models.run(chat.chat(_ask(1), stage="q")).content

    async def collect():
        result = ChatResult("")
        chunks = [c async for c in chat.stream(_ask(1), stage="q", result=result)]
        return chunks, result

    chunks, result = models.run(collect())
    assert len(chunks) >= 2 and "".join(chunks) == plain == result.content
    assert result.prompt_tokens > 0 and result.completion_tokens > 0
    assert chat.ledger.total("q").calls == 2


def test_json_schema_answer_conforms(tmp_path, simulator):
    root = make_root(tmp_path / "p", simulator.base_url)
    models = _models(root)
    chat = models.chat("default_chat")
    schema = {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "rating": {"type": "number"},
            "findings": {"type": "array", "items": {"type": "object", "properties": {"summary": {"type": "string"}}}},
        },
        "required": ["title", "rating", "findings"],
    }
    fmt = {"type": "json_schema", "json_schema": {"name": "report", "schema": schema, "strict": True}}
    answer = json.loads(models.run(chat.chat(_ask(2), stage="q", response_format=fmt)).content)
    assert isinstance(answer["title"], str) and isinstance(answer["rating"], float)
    assert isinstance(answer["findings"], list) and "summary" in answer["findings"][0]


def test_embeddings_are_batched_deterministic_and_similar_for_similar_text(tmp_path, simulator):
    root = make_root(tmp_path / "p", simulator.base_url, cache={"enabled": False})
    models = _models(root)
    emb = models.embedding("default_embedding")
    texts = ["李明在杭州开咖啡店", "李明在杭州开了一家咖啡店", "supplier of coffee beans in Yunnan"] * 7
    vectors = models.run(emb.embed(texts, stage="embed"))
    assert len(vectors) == 21 and len(emb.batches(texts)) == 2  # batch_size 16
    dot = lambda a, b: sum(x * y for x, y in zip(a, b))  # noqa: E731
    assert all(v.dtype == "float32" and v.shape == vectors[0].shape for v in vectors), "float32 arrays, one size"
    assert vectors[0].tolist() == vectors[3].tolist()
    assert dot(vectors[0], vectors[1]) > dot(vectors[0], vectors[2])


def test_401_stops_at_once_with_one_line_and_the_key_leaks_nowhere(tmp_path):
    wrong_key = "sk-wrong-key-should-never-leak-42"
    with SimulatorProcess(api_key=TEST_KEY) as sim:
        root = make_root(tmp_path / "p", sim.base_url, key=wrong_key)
        started = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-m", "graphrag_ray.cli", "check", "--root", str(root)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        elapsed = time.perf_counter() - started
        assert sim.stats().get("401") == 1, "a 401 must not be retried"
        # the same through the Python API, with every logger at DEBUG writing to a file in the root
        log_file = root / "debug.log"
        handler = logging.FileHandler(log_file)
        logging.getLogger().addHandler(handler)
        logging.getLogger().setLevel(logging.DEBUG)
        try:
            from graphrag_ray.secrets import install_log_redaction

            install_log_redaction()
            with pytest.raises(LLMFatalError) as err:
                failing = _models(root)
                failing.run(_run_batch(failing, 3))
        finally:
            logging.getLogger().removeHandler(handler)
            logging.getLogger().setLevel(logging.WARNING)
    print(f"401 command wall time: {elapsed:.2f}s")
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "401" in lines[0] and "gpt-4o-mini" in lines[0] and sim.base_url in lines[0]
    assert wrong_key not in out.stdout + out.stderr + str(err.value)
    assert files_containing(root, wrong_key) == []


def test_limiter_shared_by_ray_actors_keeps_under_server_limits(ray_session):
    sys.path.insert(0, str(Path(__file__).parents[2] / "jobs"))
    from bench_limiter import run_benchmark

    figures = run_benchmark(duration=20, actors=4, concurrency=16, tpm=30_000, rpm=300, latency=0.1, warmup=6)
    print(figures)
    assert figures["429s_received"] == 0 and figures["server_429s"] == 0
    assert figures["utilisation"] >= 0.85


def test_limits_the_provider_announces_are_learned_and_kept_with_no_limit_configured(tmp_path):
    """No rate_limit in the settings; the server allows 1,500 tokens a minute over a sliding window and says so in
    x-ratelimit-* headers. A batch worth ~1.5 minutes of that finishes with no failure, a 429 at most for the
    first requests sent before any answer, and no 60-s window above the limit."""
    with SimulatorProcess(tpm=1500, rpm=100) as sim:
        root = make_root(tmp_path / "p", sim.base_url, cache={"enabled": False})
        models = Models.create(settings_for(root), root, cautious_start=True)
        started = time.monotonic()
        results = models.run(_run_batch(models, 36))
        wall = time.monotonic() - started
        server = sim.stats()
    total = models.ledger.total("batch")
    tokens = server["prompt_tokens"] + server["completion_tokens"]
    assert len(results) == 36 and total.failures == 0 and total.calls == server["ok"] == 36
    assert tokens > 1500 * 1.2, "the batch needs more than one minute's allowance"
    assert server.get("429_limit", 0) <= 1 and server["max_tokens_60s"] <= 1500
    assert wall >= 60, "the rest waited for the window to slide"


def test_the_same_request_sent_twice_at_once_is_paid_once(tmp_path, simulator):
    root = make_root(tmp_path / "p", simulator.base_url)
    models = _models(root)
    chat = models.chat("default_chat")
    messages = [{"role": "user", "content": "A passage a corpus repeats: Alice Martin met Bob Chen in Paris."}]

    async def twice():
        return await asyncio.gather(*(chat.chat(messages, stage="dup") for _ in range(3)))

    simulator.reset()
    answers = models.run(twice())
    assert len({a.content for a in answers}) == 1 and sum(not a.cached for a in answers) == 1
    usage = models.ledger.total("dup")
    assert (usage.calls, usage.cache_hits) == (1, 2) and simulator.stats()["ok"] == 1


def test_two_closes_of_a_models_clients_at_once_both_end_cleanly(tmp_path, simulator):
    """Ctrl-C ends an API call's own close and its runner's together: each model's client is taken off before it
    is closed, so neither close takes one the other already took (it was `IndexError: pop from empty list`, exit
    1, not 130), and both clients end closed."""
    models = _models(make_root(tmp_path / "p", simulator.base_url, cache={"enabled": False}))

    async def main():
        opened = [models.chat("default_chat").client, models.embedding("default_embedding").client]
        await asyncio.gather(models.aclose(), models.aclose())
        return opened

    assert all(client.closed for client in asyncio.run(main()))


def test_a_request_given_up_on_after_sending_is_counted_abandoned(tmp_path):
    """The server takes longer than request_timeout and finishes anyway: the answer no one read is one a provider
    bills, so the ledger says how many there were (calls + abandoned = what the server generated)."""
    with SimulatorProcess(latency=1.5) as sim:
        root = make_root(tmp_path / "p", sim.base_url, cache={"enabled": False})
        text = (root / "settings.yaml").read_text().replace("request_timeout: 10", "request_timeout: 0.5")
        (root / "settings.yaml").write_text(
            text.replace("max_tokens: 800", "max_tokens: 800\n    stream_requests: never")
        )
        models = _models(root)
        model = models.chat("default_chat")
        model.config.retry.max_attempts = 2
        with pytest.raises(Exception, match="gave up after 2 attempts"):
            models.run(model.chat([{"role": "user", "content": "hello"}], stage="slow", use_cache=False))
        time.sleep(2)  # the server finishes what it was given
        server = sim.stats()
    total = models.ledger.total("slow")
    assert total.calls == 0 and total.abandoned == 2 and total.failures == 1
    assert server["ok"] == total.calls + total.abandoned, server
