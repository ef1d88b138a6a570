"""Entity resolution (`resolve_entities.enabled`): aliases merge with it on, stay apart with it off, every merge is
explained in `entity_merges`, people who only share a surname stay apart, and `update` keeps the merges."""

from __future__ import annotations

import polars as pl
import pytest

from graphrag_ray import api
from graphrag_ray.storage.tables import current_index, read_table
from tests.helpers import make_root

STORY = """Sherlock Holmes lives in London with John Watson. Sherlock Holmes solved the case of the missing letter.

Holmes examined the letter at Baker Street. Holmes smoked a pipe by the fire.

Mr. Holmes told the answer. Mary Watson visited London in the spring.

John Watson wrote the story of the case. Mary Watson laughed at the story.
"""
CAFE = """李明在杭州开了一家咖啡店。店员都叫李明李老板。

李老板每天早上六点开门。李老板喜欢桂花拿铁。

李华是李明的表妹，在上海读书。李华暑假来杭州帮忙。
"""


def build(root, base_url, enabled: bool):
    make_root(root, base_url, chunks={"size": 60, "overlap": 0}, resolve_entities={"enabled": enabled})
    (root / "input").mkdir(exist_ok=True)
    (root / "input" / "story.txt").write_text(STORY, encoding="utf-8")
    (root / "input" / "cafe.txt").write_text(CAFE, encoding="utf-8")
    return api.build_index(root=root)


def tables(root):
    folder = current_index(root / "output")
    return {name: read_table(folder, name) for name in ("entities", "relationships", "entity_merges", "text_units")}


@pytest.fixture(scope="module")
def resolved(tmp_path_factory, simulator, ray_session):
    simulator.reset()
    root = tmp_path_factory.mktemp("resolution") / "on"
    result = build(root, simulator.base_url, enabled=True)
    return root, result, simulator.stats()


def test_aliases_merge_into_the_full_name_and_each_merge_is_explained(resolved):
    root, result, served = resolved
    t = tables(root)
    titles = set(t["entities"]["title"].to_list())
    assert {"SHERLOCK HOLMES", "李明"} <= titles
    assert "HOLMES" not in titles and "李老板" not in titles
    merges = {(r["merged"], r["entity"]): r for r in t["entity_merges"].iter_rows(named=True)}
    assert set(merges) == {("HOLMES", "SHERLOCK HOLMES"), ("李老板", "李明")}
    assert merges[("李老板", "李明")]["rule"] == "surname with a title"
    assert all(r["reason"] for r in merges.values())
    # every mention is kept: the merged entity is linked to the units where only the alias appeared
    holmes = t["entities"].filter(pl.col("title") == "SHERLOCK HOLMES").row(0, named=True)
    units = dict(zip(t["text_units"]["id"].to_list(), t["text_units"]["text"].to_list()))
    assert any("Holmes examined" in units[u] for u in holmes["text_unit_ids"])
    assert (
        not t["relationships"]
        .filter(pl.col("source").is_in(["HOLMES", "李老板"]) | pl.col("target").is_in(["HOLMES", "李老板"]))
        .height
    )
    # the confirmation calls are in the ledger, one per candidate group, as the server counted them
    stage = result.ledger.total("resolve_entities")
    assert stage.calls == served.get("kind_resolve_entities", 0) >= 1


def test_people_who_share_a_surname_stay_apart(resolved):
    root, _, _ = resolved
    t = tables(root)
    assert {"JOHN WATSON", "MARY WATSON", "李华", "李明"} <= set(t["entities"]["title"].to_list())
    # 李老板 could stand for 李明 or 李华: it was asked about both, and merged with the one the text names
    assert "李华" not in t["entity_merges"]["entity"].to_list() + t["entity_merges"]["merged"].to_list()


def test_with_resolution_off_the_aliases_stay_and_nothing_is_asked(tmp_path, simulator, ray_session):
    simulator.reset()
    build(tmp_path / "off", simulator.base_url, enabled=False)
    t = tables(tmp_path / "off")
    assert {"HOLMES", "SHERLOCK HOLMES", "李老板", "李明"} <= set(t["entities"]["title"].to_list())
    assert t["entity_merges"] is None
    assert simulator.stats().get("kind_resolve_entities", 0) == 0


def test_update_keeps_the_merges_and_asks_nothing_the_cache_can_answer(resolved, simulator):
    root, _, first = resolved
    simulator.reset()
    (root / "input" / "more.txt").write_text(
        "Mrs. Hudson cleaned the stairs of the house in the morning.\n", encoding="utf-8"
    )
    api.update_index(root=root)
    t = tables(root)
    titles = set(t["entities"]["title"].to_list())
    assert "HOLMES" not in titles and "SHERLOCK HOLMES" in titles and "HUDSON" in titles
    merged = set(zip(t["entity_merges"]["merged"], t["entity_merges"]["entity"]))
    assert merged == {("HOLMES", "SHERLOCK HOLMES"), ("李老板", "李明")}
    # the candidate groups and their evidence did not change: their answers come from the cache
    assert first.get("kind_resolve_entities", 0) >= 1
    assert simulator.stats().get("kind_resolve_entities", 0) == 0


def test_estimate_shows_what_resolution_will_cost(resolved):
    root, _, _ = resolved
    stages = {s.stage: s for s in api.estimate_index(root).stages}
    assert stages["resolve_entities"].calls >= 1 and stages["resolve_entities_names"].calls >= 1


def test_steps_read_only_the_prompts_they_declare_and_each_decides_the_fingerprint(tmp_path, simulator, monkeypatch):
    """The fingerprint, the run id and the prompt pre-check come from the steps' declarations: a step reading a
    prompt it does not declare fails here, and editing the resolution prompt makes `update` refuse (it once
    changed neither: a resumed run published merges the old prompt decided)."""
    from graphrag_ray.exec.step import StepContext
    from graphrag_ray.index.pipeline import declared_prompts, graph_fingerprint, method_steps

    read = []
    real_prompt = StepContext.prompt
    monkeypatch.setattr(StepContext, "prompt", lambda self, path: read.append(path) or real_prompt(self, path))
    root = tmp_path / "declared"
    make_root(
        root,
        simulator.base_url,
        chunks={"size": 60, "overlap": 0},
        workers={"executor": "local"},
        resolve_entities={"enabled": True},
        extract_claims={"enabled": True},
    )
    (root / "input").mkdir()
    (root / "input" / "story.txt").write_text(STORY, encoding="utf-8")
    api.build_index(root=root)
    settings = api.load_settings(root)
    declared = set(declared_prompts(method_steps("standard"), settings))
    assert set(read) <= declared, f"read but not declared: {set(read) - declared}"
    assert settings.resolve_entities.prompt in declared and settings.extract_claims.prompt in declared
    ctx = StepContext(settings, root)
    before = graph_fingerprint(ctx, "standard")
    (root / settings.resolve_entities.prompt).parent.mkdir(parents=True, exist_ok=True)
    (root / settings.resolve_entities.prompt).write_text(
        real_prompt(ctx, settings.resolve_entities.prompt) + "\nTreat nicknames as the same person.\n"
    )
    assert graph_fingerprint(StepContext(settings, root), "standard") != before
    with pytest.raises(Exception, match="prompts changed since the published index"):
        api.update_index(root=root)
