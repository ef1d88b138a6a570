"""Policy code, one rule per test: how entities merge (title, type, implied endpoints, self-loops), what a
community report's context holds when its rows do not fit, and which map points reach global search's reduce."""

from __future__ import annotations

import polars as pl

from graphrag_ray.config.settings import Settings
from graphrag_ray.exec.step import StepContext
from graphrag_ray.index.steps.community_reports import STEP as REPORTS
from graphrag_ray.index.steps.merge_graph import STEP as MERGE
from graphrag_ray.parsing.context_tables import parse_context_tables

ENT = {"title": pl.String, "type": pl.String, "description": pl.String, "text_unit_id": pl.String, "order": pl.Int64}
REL = {
    "source": pl.String,
    "target": pl.String,
    "description": pl.String,
    "weight": pl.Float64,
    "text_unit_id": pl.String,
    "order": pl.Int64,
}


def _merge(entities: list[tuple], relationships: list[tuple]) -> dict[str, pl.DataFrame]:
    units = pl.DataFrame({"id": ["u1", "u2", "u3"], "human_readable_id": [0, 1, 2]})
    tables = {
        "extracted_entities": pl.DataFrame(entities, schema=ENT, orient="row"),
        "extracted_relationships": pl.DataFrame(relationships, schema=REL, orient="row"),
        "text_units": units,
    }
    return MERGE.run(StepContext(Settings(), "."), tables)


def test_merge_keeps_the_most_frequent_surface_form_and_type():
    out = _merge(
        [
            ("Li Ming", "PERSON", "owner", "u1", 0),
            ("LI MING", "PERSON", "runs a cafe", "u2", 0),
            ("LI MING", "ORGANIZATION", "", "u3", 0),
            ("ｌｉ　ｍｉｎｇ", "PERSON", "owner", "u3", 1),
        ],
        [],
    )["merged_entities"]
    assert out.height == 1, "case, full width and spaces fold to one entity"
    row = out.row(0, named=True)
    assert row["title"] == "LI MING" and row["type"] == "PERSON"
    assert row["descriptions"] == ["owner", "runs a cafe"], "distinct, non-empty descriptions in text order"
    assert row["text_unit_ids"] == ["u1", "u2", "u3"] and row["frequency"] == 3


def test_merge_ties_break_alphabetically_and_chinese_names_are_kept_as_written():
    out = _merge(
        [("李明", "PERSON", "a", "u1", 0), ("李明", "GEO", "b", "u2", 0), ("李 明", "PERSON", "c", "u3", 0)], []
    )["merged_entities"].sort("title")
    assert out["title"].to_list() == ["李 明", "李明"], "no case or width to fold in Chinese; spaces do separate"
    assert out.filter(pl.col("title") == "李明")["type"].item() == "GEO", "a 1-1 tie goes to the first type A-Z"


def test_relationships_add_missing_endpoints_drop_self_loops_and_sum_weights():
    out = _merge(
        [("ALICE", "PERSON", "a founder", "u1", 0)],
        [
            ("ALICE", "ACME", "founded", 2.0, "u1", 0),
            ("alice", "ACME", "leads", 3.0, "u2", 0),
            ("ALICE", "Alice", "herself", 1.0, "u2", 1),
        ],
    )
    ents = {r["title"]: r for r in out["merged_entities"].iter_rows(named=True)}
    assert set(ents) == {"ALICE", "ACME"} and ents["ACME"]["type"] == "", "an implied endpoint has no type"
    assert ents["ACME"]["descriptions"] == ["founded", "leads"]
    rel = out["merged_relationships"].row(0, named=True)
    assert out["merged_relationships"].height == 1 and rel["weight"] == 5.0
    assert (rel["source"], rel["target"]) == ("ALICE", "ACME") and rel["combined_degree"] == 2


def test_a_relationship_the_gleaning_round_repeats_keeps_its_single_weight():
    out = _merge(
        [],
        [
            ("ALICE", "ACME", "founded", 5.0, "u1", 0),  # first pass
            ("ALICE", "ACME", "founded in 1990", 5.0, "u1", 3),  # the gleaning round, same unit
            ("ALICE", "ACME", "leads", 2.0, "u2", 0),
        ],
    )  # another text unit: adds up
    rel = out["merged_relationships"].row(0, named=True)
    assert rel["weight"] == 5.0 + 2.0, "once per text unit, summed over text units"
    assert rel["descriptions"] == ["founded", "founded in 1990", "leads"] and rel["text_unit_ids"] == ["u1", "u2"]


def _community(n_entities: int, children: list[dict], description: str = "x" * 40) -> dict:
    entities = [
        {"id": f"e{i}", "human_readable_id": i, "title": f"E{i}", "description": description, "degree": n_entities - i}
        for i in range(n_entities)
    ]
    relationships = [
        {
            "id": f"r{i}",
            "human_readable_id": i,
            "source": f"E{i}",
            "target": f"E{i + 1}",
            "description": "linked",
            "combined_degree": 2,
        }
        for i in range(n_entities - 1)
    ]
    return {"item_id": "c", "community": 0, "entities": entities, "relationships": relationships, "children": children}


def _child(number: int, members: range, content_words: int = 20) -> dict:
    return {
        "entity_ids": [f"e{i}" for i in members],
        "size": len(members),
        "report": {
            "community": number,
            "title": f"Child {number}",
            "summary": f"summary {number}",
            "full_content": f"# Child {number}\n\n" + f"finding{number} " * content_words,
        },
    }


def count(text: str) -> int:
    return len(text.split())


def test_report_context_is_the_members_while_they_fit():
    item = _community(4, [_child(1, range(0, 2))])
    text = REPORTS.context(item, 10_000, count)
    tables = parse_context_tables(text)
    assert len(tables["entities"]) == 4 and len(tables["relationships"]) == 3 and "reports" not in tables


def test_report_context_swaps_children_in_for_their_members_when_too_large():
    item = _community(30, [_child(1, range(0, 20)), _child(2, range(20, 25))], description="word " * 30)
    budget = count(REPORTS.context(_community(10, [], description="word " * 30), 10_000, count)) + 40
    tables = parse_context_tables(REPORTS.context(item, budget, count))
    assert [r["id"] for r in tables["reports"]] == ["1"], "the largest child first, and only as many as needed"
    assert {r["title"] for r in tables["entities"]} == {f"E{i}" for i in range(20, 30)}


def test_sub_reports_bring_their_full_content_and_a_tiny_budget_still_gets_one():
    item = _community(30, [_child(1, range(0, 20), 50), _child(2, range(20, 25), 50)], description="word " * 30)
    budget = count(REPORTS.context(_community(10, [], description="word " * 30), 10_000, count)) + 80
    text = REPORTS.context(item, budget, count)
    assert "finding1 " * 50 in text, "a sub-community's report enters whole (full content), not its summary"
    tiny = REPORTS.context(item, 70, count)  # no member rows and no pair of reports fit; one report does
    tables = parse_context_tables(tiny)
    assert [r["id"] for r in tables["reports"]] == ["1"] and "finding1" in tiny


def test_report_context_keeps_the_top_degree_rows_when_nothing_else_fits():
    item = _community(30, [], description="word " * 30)
    text = REPORTS.context(item, 300, count)
    tables = parse_context_tables(text)
    assert count(text) <= 300 and 0 < len(tables["entities"]) < 30
    assert tables["entities"][0]["title"] == "E0", "highest degree first"


def test_reduce_context_keeps_the_best_points_within_the_budget(tmp_path):
    from graphrag_ray.llm.models import Models
    from graphrag_ray.query.global_search import GlobalSearch
    from graphrag_ray.query.index_data import IndexData

    settings = Settings.model_validate({"global_search": {"reduce_max_tokens": 60}})
    engine = GlobalSearch(IndexData.from_frames(), Models.create(settings, tmp_path), settings, tmp_path)
    batches = [
        [{"description": "low " * 5, "score": 1}, {"description": "zero", "score": 0}],
        [{"description": "high " * 5, "score": 9}, {"description": "mid " * 5, "score": 5}],
        [{"description": "long " * 200, "score": 7}],
    ]
    text, kept = engine.reduce_context(batches)
    assert [p["score"] for p in kept] == [9], "by score; a point that does not fit ends the context"
    assert text.startswith("----Analyst 2----\nImportance Score: 9")
    wide = Settings.model_validate({"global_search": {"reduce_max_tokens": 100_000}})
    engine = GlobalSearch(IndexData.from_frames(), Models.create(wide, tmp_path), wide, tmp_path)
    _, kept = engine.reduce_context(batches)
    assert [(p["analyst"], p["score"]) for p in kept] == [(2, 9), (3, 7), (2, 5), (1, 1)], "score-0 points dropped"


def test_a_503_with_retry_after_is_waited_out_like_a_429_and_a_refused_connection_is_named():
    import asyncio

    import httpx2
    import openai

    from graphrag_ray.config.settings import ModelConfig
    from graphrag_ray.llm.client import OpenAIClient
    from graphrag_ray.llm.outcomes import RateLimitedError, TransientLLMError

    async def outcomes(http_client: str):
        client = OpenAIClient(
            "m", ModelConfig(api_base="http://127.0.0.1:9/v1", api_key="k", model="x", http_client=http_client)
        )
        try:
            overloaded = client._from_status(503, {"retry-after-ms": "1500"}, "overloaded")
            plain = client._from_status(503, {}, "overloaded")
            try:  # nothing listens on port 9: the connection is refused
                await client.chat([{"role": "user", "content": "hi"}], {})
            except TransientLLMError as exc:
                refused = exc
            return overloaded, plain, refused
        finally:
            await client.close()

    for http_client in ("aiohttp", "httpx"):
        overloaded, plain, refused = asyncio.run(outcomes(http_client))
        assert isinstance(overloaded, RateLimitedError) and overloaded.retry_after == 1.5
        assert isinstance(plain, TransientLLMError) and not isinstance(plain, RateLimitedError)
        assert str(refused).endswith("failed: connection refused"), (http_client, str(refused))

    # Azure goes through the SDK, which calls a refused connection a timeout: the cause is still named
    client = OpenAIClient(
        "m",
        ModelConfig(api_type="azure", api_base="http://127.0.0.1:9", api_version="2024-06-01", api_key="k", model="x"),
    )
    request = httpx2.Request("POST", "http://127.0.0.1:9/openai/deployments/x/chat/completions")
    status = openai.APIStatusError(
        "error", response=httpx2.Response(503, headers={"retry-after-ms": "1500"}, request=request), body=None
    )
    assert client._translate(status).retry_after == 1.5
    try:
        raise openai.APITimeoutError(request=request) from ConnectionRefusedError(111, "Connect call failed")
    except openai.APITimeoutError as exc:
        refused = client._translate(exc)
    assert str(refused).endswith("failed: connection refused"), "the SDK calls it a timeout; the cause is named"
