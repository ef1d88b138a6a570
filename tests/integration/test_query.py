"""Every query method against an index of the coffee-shop corpus built with the simulator."""

from __future__ import annotations

import math
import subprocess
import sys
from asyncio import run as run_closing  # the API closes the HTTP sessions it opened

import polars as pl
import pytest

from graphrag_ray import api
from graphrag_ray.llm.models import Models
from graphrag_ray.query.factory import make_engine
from graphrag_ray.query.global_search import GlobalSearch
from graphrag_ray.query.index_data import IndexData
from tests.helpers import cli_in_process, published_index
from tests.integration.test_index import coffee_root

QUESTION = "李明在经营咖啡店过程中都经历了哪些挑战？"


@pytest.fixture(scope="module")
def root(tmp_path_factory, simulator, ray_session):
    project = coffee_root(tmp_path_factory.mktemp("query"), simulator.base_url)
    api.build_index(root=project)
    return project


def run(coro):
    return run_closing(coro)


@pytest.mark.parametrize("method", ["local", "global", "drift", "basic", "hybrid", "auto"])
def test_each_method_answers_with_accounting(root, method, simulator):
    before = simulator.stats()
    result = run(api.search(QUESTION, method, root))
    served = simulator.stats().get("ok", 0) - before.get("ok", 0)  # answers the endpoint gave: chat and vectors
    assert result.response and "I am sorry" not in result.response and "do not know" not in result.response
    assert result.llm_calls >= 1 and result.completion_time > 0
    paid = result.details["paid_calls"]
    assert paid == served  # what was paid is what the endpoint served
    again = run(api.search(QUESTION, method, root))  # the same question: every call answered by the cache
    assert again.details["paid_calls"] == 0 and again.llm_calls == result.llm_calls  # calls = paid + cache hits
    if paid:  # what was paid for has tokens and a price (the settings price the simulated model)
        assert result.prompt_tokens > 0 and result.output_tokens > 0 and result.cost > 0
    else:
        assert result.prompt_tokens == result.output_tokens == 0 and result.cost == 0
    assert result.context_data, "the records used are returned"
    if method == "auto":
        assert result.details["route"] == "local"  # the question names 李明


def test_local_context_is_about_li_ming_and_cites_human_readable_ids(root):
    result = run(api.search("李明", "local", root, context_only=True))
    entities = result.context_data["entities"]
    assert entities[0]["entity"] == "李明"
    assert any("李明" in r["source"] or "李明" in r["target"] for r in result.context_data["relationships"])
    sources = result.context_data["sources"]
    assert sources and "李明" in sources[0]["text"]  # the first Source is about the entity the question names
    assert "-----Entities-----\nid|entity|description|number of relationships" in result.context_text
    assert "-----Relationships-----\nid|source|target|description|weight|rank|links" in result.context_text
    assert "-----Sources-----\nid|text" in result.context_text
    answer = run(api.search(QUESTION, "local", root)).response
    assert "[Data: " in answer and "Entities (" in answer


def test_context_only_makes_no_chat_call(root, simulator):
    before = simulator.stats()
    for method in ("local", "global", "drift", "basic", "hybrid"):
        result = run(api.search(QUESTION, method, root, context_only=True))
        assert result.context_text and result.response == ""
    after = simulator.stats()
    chat_calls = lambda s: sum(v for k, v in s.items() if k.startswith("kind_") and k != "kind_embedding")  # noqa
    assert chat_calls(after) == chat_calls(before)


def test_global_map_calls_follow_the_budget_and_one_reduce(root, simulator):
    settings, index, models = api.open_index(root)
    settings.global_search.data_max_tokens = 400
    settings.global_search.executor = "ray"  # every map call is a Ray task
    engine = GlobalSearch(index, models, settings, root=root, community_level=0)
    batches = engine.batches(index.reports_at_level(0))
    tokens = sum(engine.chat("default_chat").tokenizer.count(text) for text, _ in batches)
    before = simulator.stats()
    result = run(engine.search(QUESTION + " (budget test)"))
    after = simulator.stats()
    maps = after.get("kind_query_global_map", 0) - before.get("kind_query_global_map", 0)
    reduces = after.get("kind_query_global_reduce", 0) - before.get("kind_query_global_reduce", 0)
    assert result.details["map_calls"] == len(batches) == maps >= 2
    assert math.ceil(tokens / 400) <= maps <= len(index.reports_at_level(0))
    assert reduces == 1
    assert result.llm_calls == maps + 1


def synthetic_tree() -> IndexData:
    """Two root communities (coffee / space), each with four children; reports say what they are about."""
    topics = {0: ("咖啡", "coffee shop latte espresso barista"), 1: ("太空", "rocket orbit satellite launch")}
    communities, reports, entities = [], [], []
    number = 2
    for root_id, (zh, words) in topics.items():
        kids = list(range(number, number + 4))
        number += 4
        communities.append(
            {
                "id": f"c{root_id}",
                "human_readable_id": root_id,
                "community": root_id,
                "level": 0,
                "parent": -1,
                "children": kids,
                "title": zh,
                "entity_ids": [],
                "relationship_ids": [],
                "text_unit_ids": [],
                "period": "",
                "size": 4,
            }
        )
        reports.append(
            {
                "id": f"r{root_id}",
                "human_readable_id": root_id,
                "community": root_id,
                "level": 0,
                "parent": -1,
                "children": kids,
                "title": zh,
                "summary": words,
                "full_content": f"# {zh}\n\n{words}",
                "rank": 5.0,
                "rating_explanation": "",
                "findings": [],
                "full_content_json": "{}",
                "period": "",
                "size": 4,
            }
        )
        for k in kids:
            communities.append(
                {
                    "id": f"c{k}",
                    "human_readable_id": k,
                    "community": k,
                    "level": 1,
                    "parent": root_id,
                    "children": [],
                    "title": f"{zh}{k}",
                    "entity_ids": [f"e{k}"],
                    "relationship_ids": [],
                    "text_unit_ids": [],
                    "period": "",
                    "size": 1,
                }
            )
            reports.append(
                {
                    "id": f"r{k}",
                    "human_readable_id": k,
                    "community": k,
                    "level": 1,
                    "parent": root_id,
                    "children": [],
                    "title": f"{zh}{k}",
                    "summary": words,
                    "full_content": f"# {zh} {k}\n\n{words} detail {k}",
                    "rank": 3.0,
                    "rating_explanation": "",
                    "findings": [],
                    "full_content_json": "{}",
                    "period": "",
                    "size": 1,
                }
            )
            entities.append(
                {
                    "id": f"e{k}",
                    "human_readable_id": k,
                    "title": f"E{k}",
                    "type": "X",
                    "description": words,
                    "text_unit_ids": [],
                    "frequency": 1,
                    "degree": 0,
                }
            )
    return IndexData.from_frames(
        entities=pl.DataFrame(entities), communities=pl.DataFrame(communities), community_reports=pl.DataFrame(reports)
    )


def test_dynamic_selection_rates_fewer_reports_when_one_branch_is_relevant(root):
    settings, _, _ = api.open_index(root)
    settings.global_search.executor = "local"
    data = synthetic_tree()
    models = Models.create(settings, root)
    question = "Which coffee shop sells espresso and latte?"
    static = run(GlobalSearch(data, models, settings, root=root, community_level=1).search(question))
    settings.global_search.dynamic_lookahead_levels = 0  # level by level
    dynamic = run(
        GlobalSearch(data, models, settings, root=root, community_level=1, dynamic_community_selection=True).search(
            question
        )
    )
    assert static.details["reports_used"] == 8
    assert dynamic.details["dynamic_rated"] == 2 + 4 < static.details["reports_used"]
    assert dynamic.details["dynamic_kept"] == 4  # the coffee children replace their parent; space is pruned
    assert dynamic.details["dynamic_calls"] == 2  # one call per level: every report of a level rated in one
    assert dynamic.response and "I am sorry" not in dynamic.response

    # rating the level below in the same round: one round trip, the same selection
    settings.global_search.dynamic_lookahead_levels = 1
    ahead = run(
        GlobalSearch(data, models, settings, root=root, community_level=1, dynamic_community_selection=True).search(
            question
        )
    )
    assert ahead.details["dynamic_calls"] == 1 and ahead.details["dynamic_rated"] == 2 + 8
    assert ahead.context_data["reports"] == dynamic.context_data["reports"]

    # a budget the root's coffee report already fills: no descent, that report alone is mapped
    settings.global_search.dynamic_budget_tokens = 5
    settings.global_search.dynamic_lookahead_levels = 0
    budgeted = run(
        GlobalSearch(data, models, settings, root=root, community_level=1, dynamic_community_selection=True).search(
            question
        )
    )
    assert budgeted.details["dynamic_rated"] == 2 and budgeted.details["dynamic_calls"] == 1
    assert budgeted.details["dynamic_kept"] == 1 and budgeted.context_data["reports"][0]["title"] == "咖啡"


def test_streamed_answer_arrives_in_chunks_equal_to_the_answer(root):
    async def collect():
        settings, index, models = api.open_index(root)
        engine = make_engine("local", index, models, settings, root)
        chunks = [c async for c in engine.stream_search(QUESTION + " stream")]
        return chunks, engine.last_result

    chunks, result = run(collect())
    assert len(chunks) >= 2 and "".join(chunks) == result.response
    assert result.llm_calls >= 1


def test_question_generation_returns_a_clean_list(root):
    from graphrag_ray.query.local import LocalSearch
    from graphrag_ray.query.question_gen import LocalQuestionGen

    settings, index, models = api.open_index(root)
    qgen = LocalQuestionGen(LocalSearch(index, models, settings, root=root))
    result = run(qgen.agenerate(["李明在杭州开了什么店？"], None, 3))
    assert len(result.response) == 3
    assert all(q and not q.startswith(("-", "*", "•")) for q in result.response)
    assert result.llm_calls >= 1 and result.completion_time > 0


def test_chat_loop_through_stdin_picks_follow_up_two_and_exits(root):
    out = subprocess.run(
        [sys.executable, "-m", "graphrag_ray.cli", "chat", "--root", str(root)],
        input=f"{QUESTION}\n2\nexit\n",
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    assert "[2] " in out.stdout and "(follow-up 2: " in out.stdout
    assert out.stdout.count("Assistant: ") == 2 and out.stdout.rstrip().endswith("bye")


@pytest.mark.parametrize(
    "args, message, code",
    [
        (["query", ""], "empty query", 2),  # usage mistakes exit 2, as the parser's own do
        (["query", "x", "--method", "magic"], "unknown method", 2),
        (["query", "x", "--method", "global", "--community-level", "-1"], "a level is 0 (the root) or deeper", 2),
        (["query", "x", "--data", "/nonexistent/index"], "--data /nonexistent/index: no such folder", 1),
    ],
)
def test_bad_queries_fail_with_one_line(root, args, message, code):
    out = subprocess.run(
        [sys.executable, "-m", "graphrag_ray.cli", *args, "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == code
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], out.stderr


def test_incomplete_index_names_the_missing_table(root, tmp_path):
    import shutil

    copy = tmp_path / "partial"
    shutil.copytree(published_index(root).local_path(), copy)
    (copy / "community_reports.parquet").unlink()
    out = subprocess.run(
        [sys.executable, "-m", "graphrag_ray.cli", "query", "x", "--root", str(root), "--data", str(copy)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0 and "table 'community_reports' is missing" in out.stderr


def test_microsoft_shaped_api_takes_dataframes(root):
    import pandas as pd

    out = published_index(root).local_path()
    frames = {
        n: pd.read_parquet(out / f"{n}.parquet")
        for n in ("entities", "communities", "community_reports", "text_units", "relationships")
    }
    settings = api.load_settings(root)
    response, context = run(
        api.global_search(
            config=settings,
            entities=frames["entities"],
            communities=frames["communities"],
            community_reports=frames["community_reports"],
            community_level=0,
            dynamic_community_selection=False,
            response_type="Multiple Paragraphs",
            query=QUESTION,
            root=root,
        )
    )
    assert response and context["reports"]
    response, context = run(api.local_search(config=settings, query="李明", root=root, **frames))
    assert response and context["entities"][0]["entity"] == "李明"


def test_no_cache_is_said_to_the_api_for_that_command_only(root, simulator):
    """`query --no-cache` asks the endpoint every time (the flag reaches load_settings through the API); the
    next command in the same process, without it, is answered from the cache again."""
    question = "张伟供应什么？"

    def paid(*flags: str) -> int:
        before = simulator.stats().get("ok", 0)
        done = cli_in_process("query", "--method", "basic", *flags, question, root=root)
        assert done.returncode == 0, done.stderr
        return simulator.stats().get("ok", 0) - before

    assert paid("--no-cache") > 0 and paid("--no-cache") > 0  # nothing read from the cache, twice
    paid()  # (fills the cache)
    assert paid() == 0  # the flag did not outlive its command
