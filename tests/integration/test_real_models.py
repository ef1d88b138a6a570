"""Today's models as their servers really answer (simulate/shapes.py): reasoning models (OpenAI's o-series and GPT-5,
DeepSeek-R1, <think> tags), learned request shapes for a model the engine has never heard of, and every answer
shape recorded in public caches. Each index (standard, gleaning and claims on) must finish with 0 failures and the
same graph as a clean model gives; each query method must answer with no reasoning text in it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
import yaml
from pydantic import SecretStr

from graphrag_ray import api
from graphrag_ray.config.settings import ModelConfig, RetryConfig
from graphrag_ray.llm.cache import ResponseCache
from graphrag_ray.llm.ledger import UsageLedger
from graphrag_ray.llm.model import ChatModel
from graphrag_ray.llm.ratelimit import LocalRateLimiter
from graphrag_ray.llm.request_shape import forget_shapes
from graphrag_ray.simulate.process import SimulatorProcess
from graphrag_ray.storage.tables import read_table
from tests.helpers import published_index, published_version
from tests.integration.test_index import coffee_root

pytestmark = pytest.mark.slow  # servers and processes of their own: `-m "not slow"` leaves them out

QUESTION = "李明的咖啡店遇到了什么问题？"
# (model family, model name, answer shape): every family and every shape at least once; the made-up names have no
# family defaults, so their servers' 400s must teach the request shape
MODES = [
    ("openai-reasoning", "o3-mini", "closed-gt"),
    ("openai-reasoning", "frontier-2027", "strength-braces"),
    ("deepseek-reasoner", "deepseek-reasoner", "fenced-json"),
    ("deepseek-reasoner", "thinker-9b", "numbered"),
    ("think-tags", "qwq-32b", "numbered-one-line"),
    ("plain", "gpt-4o-mini", "bulleted"),
    ("plain", "gpt-4o-mini", "curly"),
    ("plain", "gpt-4o-mini", "broken-delimiter"),
    ("plain", "gpt-4o-mini", "prose-around"),
    ("plain", "gpt-4o-mini", "twice"),
]


def project(tmp: Path, base_url: str, model: str = "gpt-4o-mini", gleanings: int = 1, **chat) -> Path:
    root = coffee_root(tmp, base_url)
    settings = yaml.safe_load((root / "settings.yaml").read_text(encoding="utf-8"))
    # a budget no clean answer reaches, so every mode is asked the same questions as the clean one
    settings["models"]["default_chat"].update({"model": model, "max_tokens": 4000, **chat})
    settings["extract_graph"] = {"max_gleanings": gleanings}
    settings["extract_claims"] = {"enabled": True, "max_gleanings": 1}
    settings["workers"] = {"executor": "local"}
    (root / "settings.yaml").write_text(yaml.safe_dump(settings, allow_unicode=True), encoding="utf-8")
    return root


def graph(root: Path) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    index = published_index(root)
    entities = read_table(index, "entities").select("title", "type", "description").sort("title")
    pairs = read_table(index, "relationships").select("source", "target", "weight").sort("source", "target")
    return entities, pairs, read_table(index, "failures").height


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    with SimulatorProcess() as sim:
        root = project(tmp_path_factory.mktemp("clean"), sim.base_url)
        api.build_index(root=root)
        first_only = project(tmp_path_factory.mktemp("clean0"), sim.base_url, gleanings=0)
        api.build_index(root=first_only)
        return graph(root), graph(first_only)


@pytest.mark.parametrize("family,model,shape", MODES, ids=[f"{f}-{m}-{s}" for f, m, s in MODES])
def test_every_family_and_shape_builds_the_clean_graph_and_answers(clean, tmp_path, family, model, shape):
    forget_shapes()
    with SimulatorProcess(model_family=family, answer_shape=shape) as sim:
        root = project(tmp_path / "p", sim.base_url, model=model)
        result = api.build_index(root=root)
        entities, pairs, failures = graph(root)
        stats = sim.stats()
        assert failures == 0 and clean[0][0].height > 5 and clean[0][1].height > 5
        assert entities.equals(clean[0][0]), f"{family}/{shape}: entities differ from the clean model's"
        assert pairs.equals(clean[0][1]), f"{family}/{shape}: relationships differ from the clean model's"
        claims = read_table(published_index(root), "covariates")
        assert claims is not None and claims.height > 0
        if family in ("openai-reasoning", "deepseek-reasoner"):  # their servers report reasoning tokens
            assert stats["reasoning_tokens"] > 0
            assert result.ledger.total().reasoning_tokens == stats["reasoning_tokens"]
        elif family == "think-tags":  # inside the content, not reported: counted here
            assert result.ledger.total().reasoning_tokens > 0
        if family != "plain" or shape == "fenced-json":
            for method in ("local", "global", "drift", "basic"):
                answer = asyncio.run(api.search(QUESTION, method, root))
                assert answer.response.strip(), method
                assert "<think>" not in answer.response and " think think" not in answer.response, method
                assert (
                    answer.response != "I am sorry but I am unable to answer this question given the provided data."
                ), method


def test_a_gleaning_refused_twice_keeps_the_first_answer(clean, tmp_path):
    with SimulatorProcess(answer_shape="prose-gleaning") as sim:
        root = project(tmp_path / "p", sim.base_url)
        result = api.build_index(root=root)
        entities, pairs, failures = graph(root)
    assert failures == 0
    assert entities.equals(clean[1][0]) and pairs.equals(clean[1][1])  # what the first answers found, all of it
    assert result.stats["steps"]["extract_graph"]["events"]["gleanings_unusable"] > 0


def test_an_answer_cut_inside_the_reasoning_is_asked_again_with_a_larger_budget():
    """DeepSeek-R1 counts its reasoning in max_tokens: a budget spent there leaves the content empty. That is never
    an empty success: the request goes again once with twice the budget, and both are in the ledger."""
    forget_shapes()
    with SimulatorProcess(model_family="deepseek-reasoner", reasoning_tokens=900) as sim:
        config = ModelConfig(
            api_base=sim.base_url,
            api_key=SecretStr("sk-test"),
            model="deepseek-r1",
            max_tokens=900,
            reasoning_max_tokens=900,
            retry=RetryConfig(max_attempts=2, initial_wait=0.01, max_wait=0.02, jitter=0),
        )
        ledger = UsageLedger()
        chat = ChatModel("default_chat", config, cache=ResponseCache(None), limiter=LocalRateLimiter(), ledger=ledger)

        async def ask():
            try:
                plain = await chat.chat([{"role": "user", "content": "what is in the coffee shop?"}], stage="t")
                streamed = [
                    p async for p in chat.stream([{"role": "user", "content": "and in the tea house?"}], stage="t")
                ]
                return plain, "".join(streamed)
            finally:
                await chat.client.close()

        plain, streamed = asyncio.run(ask())
        served = sim.stats()
    assert plain.content.strip() and streamed.strip()
    usage = ledger.total()
    assert usage.calls == served["ok"] == 4 and usage.unusable == 2  # each: cut once, then answered
    assert usage.reasoning_tokens == served["reasoning_tokens"]


def cli_index(root: Path) -> tuple[subprocess.CompletedProcess, float]:
    """The index command's outcome; a hang fails here (not forever) with the hung process's stacks, so an
    intermittent one seen in CI says where it waits."""
    started = time.monotonic()
    args = [sys.executable, "-m", "graphrag_ray.cli", "index", "--root", str(root)]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        spy = Path(sys.executable).with_name("py-spy")
        stacks = (
            subprocess.run(
                [str(spy), "dump", "--pid", str(process.pid)], capture_output=True, text=True, timeout=60
            ).stdout
            if spy.exists()
            else "(py-spy not installed)"
        )
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"`graphrag-ray index` did not exit within 120 s; its threads:\n{stacks}\nstderr:\n{err[-3000:]}")
    return subprocess.CompletedProcess(args, process.returncode, out, err), time.monotonic() - started


@pytest.mark.parametrize("executor", ["local", "ray"])
def test_a_fatal_refusal_on_the_first_call_ends_the_run_at_once(tmp_path, executor):
    """A 400 that names nothing the request shape can change ends the run: one line, exit 1, nothing published,
    no hang (the background lanes' waits are woken when the pool closes)."""
    with SimulatorProcess(refuse_containing="-Real Data-") as sim:
        root = project(tmp_path / "p", sim.base_url)
        settings = yaml.safe_load((root / "settings.yaml").read_text(encoding="utf-8"))
        settings["workers"] = {"executor": executor}
        (root / "settings.yaml").write_text(yaml.safe_dump(settings, allow_unicode=True), encoding="utf-8")
        done, seconds = cli_index(root)
    print(f"{executor}: exit {done.returncode} after {seconds:.1f} s")
    lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 1
    assert len(lines) == 1 and "request rejected (400)" in lines[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert published_version(root) is None


def test_global_search_names_its_unusable_map_answers(tmp_path):
    with SimulatorProcess() as sim:
        root = project(tmp_path / "p", sim.base_url)
        api.build_index(root=root)
    with SimulatorProcess(answer_mode="garbage") as broken:
        settings = yaml.safe_load((root / "settings.yaml").read_text(encoding="utf-8"))
        for model in settings["models"].values():
            model["api_base"] = broken.base_url
        (root / "settings.yaml").write_text(yaml.safe_dump(settings, allow_unicode=True), encoding="utf-8")
        done = subprocess.run(
            [sys.executable, "-m", "graphrag_ray.cli", "query", "--root", str(root), "--method", "global", QUESTION],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "none of the" in done.stderr and "map answers was usable" in done.stderr
    assert "I am sorry" not in done.stdout


def test_records_copied_from_the_prompts_example_are_dropped(clean, tmp_path):
    """A small model re-prints the prompt's worked example before its answer: MARTIN SMITH and CENTRAL
    INSTITUTION occur nowhere in the corpus and must not enter the graph."""
    with SimulatorProcess(answer_shape="copy-example") as sim:
        root = project(tmp_path / "p", sim.base_url)
        result = api.build_index(root=root)
        entities, pairs, failures = graph(root)
    assert failures == 0
    assert not {"MARTIN SMITH", "CENTRAL INSTITUTION"} & set(entities["title"].to_list())
    assert entities.equals(clean[0][0]) and pairs.equals(clean[0][1])
    assert result.stats["steps"]["extract_graph"]["events"]["example_copies_dropped"] > 0


def test_a_run_whose_every_answer_is_the_example_does_not_publish(tmp_path):
    with SimulatorProcess(answer_shape="only-example") as sim:
        root = project(tmp_path / "p", sim.base_url)
        done = subprocess.run(
            [sys.executable, "-m", "graphrag_ray.cli", "index", "--root", str(root)],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 1 and "extract_graph" in done.stderr, done.stderr[-1500:]
    assert published_version(root) is None
