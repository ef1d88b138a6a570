"""The bill as a provider sends it: prompt tokens its prompt cache served are read from each response, recorded in
the ledger beside prompt and completion tokens, and priced at the cached price; prices come from the list when
nobody typed them, and a model with no known price is said to be unpriced, never a silent $0."""

from __future__ import annotations

import json

import pytest
import yaml

from graphrag_ray import api
from graphrag_ray.config.prices import list_price
from graphrag_ray.config.settings import ModelConfig, PriceConfig
from graphrag_ray.llm.prices import cached_tokens_of, price_of
from graphrag_ray.simulate.process import SimulatorProcess
from tests.helpers import cli_in_process, make_root, published_index, write_input

PRICES = {"input_per_1m": 0.40, "cached_input_per_1m": 0.10, "output_per_1m": 1.60}
EMBEDDING_PRICE = 0.02

PEOPLE = ["Ada Marsh", "Ivo Lundgren", "Maren Oskarsdottir", "Harald Vik", "Sigrid Aune", "Tomas Berg"]
PLACES = ["Bergen", "Tromsø", "Grey Point", "Olsen Foundry", "North Harbor", "Cold Dock"]


def long_story(n: int) -> str:
    """About 1,500 tokens of named people and places: an extraction prompt of over 1,024 tokens, so the gleaning
    round that resends it finds its prefix in the provider's cache."""
    lines = []
    for i in range(90):
        a, b = PEOPLE[(i + n) % len(PEOPLE)], PEOPLE[(i * 5 + n + 1) % len(PEOPLE)]
        lines.append(f"In year {1900 + i}, {a} met {b} at {PLACES[(i + 2 * n) % len(PLACES)]} to repair the lamps.")
    return " ".join(lines)


@pytest.fixture(scope="module")
def caching_provider():
    with SimulatorProcess(prompt_cache=True) as sim:
        yield sim


def test_the_ledger_bills_what_a_caching_provider_reports(tmp_path, caching_provider, ray_session):
    sim = caching_provider
    root = make_root(tmp_path / "stories", sim.base_url, workers={"executor": "local"})
    settings = yaml.safe_load((root / "settings.yaml").read_text())
    settings["models"]["default_chat"]["price"] = PRICES
    settings["models"]["default_embedding"]["price"] = {"input_per_1m": EMBEDDING_PRICE}
    (root / "settings.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
    (root / "input").mkdir()
    for n in range(3):
        (root / "input" / f"story{n}.txt").write_text(long_story(n), encoding="utf-8")
    sim.reset()
    api.build_index(root=root)
    served = sim.stats()
    ledger = json.loads(published_index(root).read_bytes("ledger.json"))["total"]
    assert served["cached_tokens"] > 0, "the gleaning rounds resend a prompt of over 1,024 tokens"
    assert ledger["prompt_tokens"] == served["prompt_tokens"]
    assert ledger["cached_tokens"] == served["cached_tokens"]
    assert ledger["completion_tokens"] == served["completion_tokens"]
    chat_prompt = served["prompt_tokens"] - served.get("prompt_tokens_embedding", 0)
    expected = (
        (chat_prompt - served["cached_tokens"]) * PRICES["input_per_1m"]
        + served["cached_tokens"] * PRICES["cached_input_per_1m"]
        + served["completion_tokens"] * PRICES["output_per_1m"]
        + served.get("prompt_tokens_embedding", 0) * EMBEDDING_PRICE
    ) / 1e6
    assert ledger["cost"] == pytest.approx(expected, rel=1e-9)
    # and the run's stats say it too
    stats = json.loads(published_index(root).read_bytes("stats.json"))
    assert stats["total"]["cached_tokens"] == served["cached_tokens"]


def test_the_usage_forms_providers_report_cached_tokens_in():
    assert cached_tokens_of({"prompt_tokens": 2000, "prompt_tokens_details": {"cached_tokens": 1024}}) == 1024
    assert cached_tokens_of({"prompt_cache_hit_tokens": 640, "prompt_cache_miss_tokens": 100}) == 640  # DeepSeek
    assert cached_tokens_of({"cached_tokens": 300}) == 300  # Moonshot
    assert cached_tokens_of({"cache_read_input_tokens": 128}) == 128  # Anthropic's form
    assert cached_tokens_of({"prompt_tokens_details": None, "prompt_tokens": 5}) == 0
    assert cached_tokens_of({"prompt_tokens_details": {"cached_tokens": "x"}}) == 0


def test_prices_come_from_the_list_unless_set_and_an_unknown_one_is_said():
    listed = price_of(ModelConfig(model="gpt-4o-mini-2024-07-18"))
    assert (listed.input, listed.cached_input, listed.output, listed.batch_discount) == (0.15, 0.075, 0.60, 0.5)
    assert listed.known and listed.source.startswith("list price")
    # 1,000 prompt tokens of which 500 cached, 100 completion; a Batch API call at half of that
    assert listed.cost(1000, 100, 500) == pytest.approx((500 * 0.15 + 500 * 0.075 + 100 * 0.60) / 1e6)
    assert listed.cost(1000, 100, 500, batch=True) == pytest.approx(listed.cost(1000, 100, 500) / 2)
    typed = price_of(ModelConfig(model="gpt-4o-mini", price=PriceConfig(input_per_1m=1.0, output_per_1m=2.0)))
    assert (typed.input, typed.cached_input, typed.output, typed.source) == (1.0, 1.0, 2.0, "settings")
    assert list_price("deepseek-chat").batch_discount is None and list_price("openai/gpt-4.1-mini").input == 0.40
    own = price_of(ModelConfig(model="qwen2.5:7b", api_base="http://127.0.0.1:11434/v1", price={"input_per_1m": 0}))
    assert own.known and own.cost(10_000, 1_000) == 0.0  # a server of one's own: priced 0 by saying so
    assert price_of(ModelConfig(type="local_embedding", model="local")).known
    unknown = price_of(ModelConfig(model="my-finetune", api_base="https://llm.example.com/v1"))
    assert not unknown.known and unknown.cost(10_000, 1_000) == 0.0


def test_an_unpriced_model_is_said_by_estimate_index_and_query(tmp_path, simulator, ray_session):
    root = make_root(tmp_path / "unpriced", simulator.base_url, workers={"executor": "local"})
    settings = yaml.safe_load((root / "settings.yaml").read_text())
    del settings["models"]["default_chat"]["price"]
    settings["models"]["default_chat"]["model"] = "house-model-7b"  # not listed; the simulator answers any name
    settings["models"]["default_chat"]["encoding"] = "o200k_base"
    (root / "settings.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
    (root / "input").mkdir()
    (root / "input" / "story.txt").write_text(long_story(0)[:3000], encoding="utf-8")
    said = "price of model 'house-model-7b' unknown: costs shown as $0"
    estimate = cli_in_process("estimate", root=root)
    assert estimate.returncode == 0, estimate.stderr
    assert "price of model 'default_chat' (house-model-7b) unknown" in " ".join(estimate.stdout.split())
    index = cli_in_process("index", root=root)
    assert index.returncode == 0, index.stderr
    assert said in " ".join(index.stdout.split()), index.stdout
    query = cli_in_process("query", "-m", "basic", "Who met Ivo Lundgren?", root=root)
    assert query.returncode == 0, query.stderr
    assert said in query.stderr


def test_a_community_too_small_for_a_report_call_gets_one_written_from_its_rows(tmp_path, caching_provider):
    """A pair's report would restate its one relationship: written from the rows, no call; every other community's
    is the model's."""
    import polars as pl

    from graphrag_ray.storage.tables import read_table

    sim = caching_provider
    root = make_root(tmp_path / "pair", sim.base_url, workers={"executor": "local"})
    (root / "input").mkdir()
    (root / "input" / "story.txt").write_text(long_story(0)[:2500], encoding="utf-8")
    (root / "input" / "pair.txt").write_text("Ola Nordmann married Kari Hansen.", encoding="utf-8")
    sim.reset()
    result = api.build_index(root=root)
    served = sim.stats()
    communities = read_table(result.index, "communities")
    reports = read_table(result.index, "community_reports").join(
        communities.select("community", pl.col("entity_ids").list.len().alias("members")), on="community"
    )
    small = reports.filter(pl.col("members") < 3)
    assert small.height >= 1 and small["rating_explanation"].str.contains("written from its rows").all()
    assert served["kind_community_report"] == reports.height - small.height
    assert result.stats["steps"]["community_reports"]["events"]["written_from_rows"] == small.height


def test_estimate_predicts_the_cached_prompt_tokens_of_gleaning_rounds(tmp_path):
    """Each gleaning round resends its first prompt (over 1,024 tokens here): the estimate counts that prefix as
    cached and prices it at the cached price."""
    from graphrag_ray.index.estimate import cacheable

    root = make_root(tmp_path / "estimate", "http://127.0.0.1:9/v1", workers={"executor": "local"})
    settings = yaml.safe_load((root / "settings.yaml").read_text())
    settings["models"]["default_chat"]["price"] = PRICES
    (root / "settings.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
    (root / "input").mkdir()
    (root / "input" / "story.txt").write_text(long_story(0), encoding="utf-8")
    extract = next(s for s in api.estimate_index(root).stages if s.stage == "extract_graph")
    assert extract.cached_tokens >= 1024 and extract.cached_tokens % 128 == 0
    assert (cacheable(1000), cacheable(1024), cacheable(1300)) == (0, 1024, 1280)
    full = (extract.prompt_tokens * PRICES["input_per_1m"] + extract.completion_tokens * PRICES["output_per_1m"]) / 1e6
    saved = extract.cached_tokens * (PRICES["input_per_1m"] - PRICES["cached_input_per_1m"]) / 1e6
    assert extract.cost == pytest.approx(full - saved)


@pytest.mark.parametrize("layout", ["names", "conversation"])
def test_a_gleaning_after_the_names_found_or_after_the_answers_finds_the_same_and_bills_as_it_says(
    tmp_path, caching_provider, layout
):
    """`extract_graph.gleaning_layout`: names resends the cached prompt and the names found; conversation resends
    the first answers as well, billed again as input (jobs/bench_cost.py --variant compares them in dollars)."""
    from graphrag_ray.storage.tables import read_table

    sim = caching_provider
    root = make_root(
        tmp_path / layout, sim.base_url, workers={"executor": "local"}, extract_graph={"gleaning_layout": layout}
    )
    (root / "input").mkdir()
    write_input(root, "story.txt", long_story(1))
    sim.reset()
    result = api.build_index(root=root)
    served = sim.stats()
    entities = read_table(result.index, "entities")["title"].sort().to_list()
    assert {"ADA MARSH", "IVO LUNDGREN", "BERGEN", "COLD DOCK"} <= set(entities)
    extra = served["prompt_tokens_extract_glean"] - served["prompt_tokens_extract_graph"]
    answers = served["completion_tokens_extract_graph"]
    assert served["kind_extract_glean"] == served["kind_extract_graph"] >= 1
    if layout == "conversation":  # every glean carries its unit's first answer
        assert extra >= answers
    else:  # the names, not the answers
        assert 0 < extra < answers
