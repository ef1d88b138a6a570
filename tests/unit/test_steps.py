"""Index steps that need no LLM, run directly."""

import asyncio
import json
import random
from pathlib import Path

import igraph as ig
import pytest

from graphrag_ray.config.settings import Settings
from graphrag_ray.errors import InputError
from graphrag_ray.exec.step import StepContext
from graphrag_ray.ids import normalize_name
from graphrag_ray.index.operations.chunking import windows
from graphrag_ray.index.steps.chunk import STEP as CHUNK
from graphrag_ray.index.steps.communities import hierarchical_leiden
from graphrag_ray.index.steps.load_documents import STEP as LOAD


def ctx_for(root: Path, **input_cfg) -> StepContext:
    settings = Settings.model_validate({"input": input_cfg} if input_cfg else {})
    return StepContext(settings, root)


def test_windows_overlap_and_cover_everything():
    spans = windows(list(range(2500)), 1200, 100)
    assert spans == [(0, 1200), (1100, 2300), (2200, 2500)]
    assert windows([], 1200, 100) == []


def test_identical_text_in_two_documents_gives_distinct_units(tmp_path):
    ctx = ctx_for(tmp_path)
    same = "李明在杭州开了一家咖啡店。" * 50
    rows = [
        asyncio.run(CHUNK.process(ctx, {"item_id": doc, "text": same, "order": i, "source": f"{doc}.txt#0"}, None))[
            "text_units"
        ]
        for i, doc in enumerate(["doc-a", "doc-b"])
    ]
    assert rows[0][0]["text"] == rows[1][0]["text"]
    assert rows[0][0]["id"] != rows[1][0]["id"]
    assert "\ufffd" not in "".join(u["text"] for u in rows[0])  # no broken CJK characters at window edges


def test_load_csv_txt_jsonl_with_failures(tmp_path):
    inp = tmp_path / "input"
    inp.mkdir()
    (inp / "a.csv").write_text("id,title,text,author\n1,First,hello world,ann\n2,Empty,,bob\n1,Dup,again,cy\n")
    (inp / "b.txt").write_text("咖啡店的故事", encoding="utf-8")
    (inp / "c.jsonl").write_text(json.dumps({"title": "J", "text": "json text", "tags": ["x"]}) + "\n")
    (inp / "d.txt").write_bytes(b"\xff\xfe\x00\x01binary")
    (inp / "e.txt").write_bytes(b"ok" + b"\xc3\x28 bad utf8")
    out = LOAD.run(ctx_for(tmp_path), {})
    docs, failures = out["documents"], out["failures"]
    assert docs["title"].to_list() == ["First", "b.txt", "J"]
    assert json.loads(docs["raw_data"][0])["author"] == "ann"
    reasons = " | ".join(failures["reason"].to_list())
    assert "no text" in reasons and "duplicate document id '1'" in reasons
    assert "binary file" in reasons and "UnicodeDecodeError" in reasons
    assert failures.height == 4


def test_csv_without_text_column_names_its_columns(tmp_path):
    (tmp_path / "input").mkdir()
    (tmp_path / "input" / "x.csv").write_text("id,body\n1,hello\n")
    with pytest.raises(InputError, match="no 'text' column.*it has: id, body"):
        LOAD.run(ctx_for(tmp_path), {})


def test_empty_input_folder_is_a_clear_error(tmp_path):
    (tmp_path / "input").mkdir()
    with pytest.raises(InputError, match="no input files"):
        LOAD.run(ctx_for(tmp_path), {})


def test_name_normalisation_folds_case_width_space_but_keeps_chinese():
    assert normalize_name("  Acme   Corp ") == normalize_name("ACME CORP") == normalize_name("ＡＣＭＥ　Ｃｏｒｐ")
    assert normalize_name("李明") == "李明" and normalize_name("李明") != normalize_name("李 明")


def test_hierarchical_leiden_covers_every_component_and_is_deterministic():
    rng = random.Random(7)
    names = [f"n{i:02d}" for i in range(40)]
    edges = set()
    for block in (range(0, 25), range(25, 40)):  # two components, each of dense groups of 4 loosely linked
        for i in block:
            for j in block:
                same = i // 4 == j // 4
                if i < j and rng.random() < (0.9 if same else 0.12):
                    edges.add((names[i], names[j]))
    g = ig.Graph()
    g.add_vertices(names)
    g.add_edges(sorted(edges))
    g.es["weight"] = [1.0] * len(edges)
    first = hierarchical_leiden(g, max_size=5, seed=42, max_levels=5)
    second = hierarchical_leiden(g, max_size=5, seed=42, max_levels=5)
    assert [c["members"] for c in first] == [c["members"] for c in second]
    level0 = [c for c in first if c["level"] == 0]
    covered = {m for c in level0 for m in c["members"]}
    assert covered == set(names)  # both components, every vertex
    assert any(c["level"] > 0 for c in first)  # big communities were split
    for c in first:
        if c["parent"] is not None:
            assert set(c["members"]) <= set(c["parent"]["members"])


def test_a_change_in_one_component_leaves_the_communities_of_the_others_as_they_were():
    def graph(extra: list[tuple[str, str]]) -> ig.Graph:
        topics = {t: [f"{t}{i}" for i in range(12)] for t in ("a", "b", "c")}
        edges = [
            (m[i], m[j])
            for m in topics.values()
            for i in range(12)
            for j in range(i + 1, 12)
            if (i * 7 + j * 3) % 5 < 2 or j == i + 1
        ]
        edges += extra
        g = ig.Graph()
        g.add_vertices(sorted({v for e in edges for v in e}))
        g.add_edges(edges)
        g.es["weight"] = [1.0] * len(edges)
        return g

    def communities(g: ig.Graph) -> set[tuple[int, tuple[str, ...]]]:
        return {(c["level"], tuple(c["members"])) for c in hierarchical_leiden(g, max_size=5, seed=42, max_levels=4)}

    before = communities(graph([]))
    after = communities(graph([("a0", "a_new1"), ("a_new1", "a_new2"), ("a3", "a_new2")]))
    untouched = lambda cs: {c for c in cs if not c[1][0].startswith("a")}  # noqa: E731
    assert untouched(before) == untouched(after) and untouched(before)
    assert before != after


def test_a_community_that_gained_or_lost_a_few_members_keeps_its_number_and_a_new_one_follows_the_last():
    """An update's communities: the same members keep the number; most of both's members shared (a member gone, one
    joined) keep it too - it is that community, changed; a split-off minority, a merger of two and anything new are
    numbered after the previous ones, in order."""
    import polars as pl

    from graphrag_ray.ids import content_id
    from graphrag_ray.index.carry import carried_community_numbers

    def cid(level, members):
        return content_id("community", level, *sorted(members))

    before = [(0, 0, "abcd"), (1, 0, "ef"), (2, 0, "ghi"), (5, 0, "pq"), (6, 0, "rs"), (3, 1, "ab"), (4, 1, "ghi")]
    previous = pl.DataFrame(
        {
            "id": [cid(level, m) for _, level, m in before],
            "community": [n for n, _, _ in before],
            "level": [level for _, level, _ in before],
            "entity_ids": [list(m) for _, _, m in before],
        }
    )
    after = [(0, "abc"), (0, "ef"), (0, "gx"), (0, "hi"), (0, "pqrs"), (1, "abc"), (1, "hiy")]
    numbers = carried_community_numbers(
        [cid(level, m) for level, m in after], [level for level, _ in after], [list(m) for _, m in after], previous
    )
    assert numbers == [0, 1, 7, 2, 8, 3, 4], (
        "abc lost d: 0; ef as it was: 1; g split off with a newcomer: new; hi kept most of ghi: 2; pq and rs merged: "
        "new; abc at level 1 gained c: 3; hiy kept most of ghi at level 1: 4"
    )
    assert carried_community_numbers(["x", "y"], [0, 0], [["a"], ["b"]], None) == [0, 1], "a full build counts"


def test_text_repeated_across_text_units_is_embedded_once_and_every_unit_gets_its_vector(tmp_path):
    """Two documents filed twice give text units with the same text: one embedding item per distinct text,
    and finish hands that vector to every unit with the text (a failed text leaves its units out, as its
    failures row says)."""
    import numpy as np
    import polars as pl

    from graphrag_ray.exec.step import SpilledRows
    from graphrag_ray.index.operations.embedding import vector_batches
    from graphrag_ray.index.steps.embed_text_units import STEP as EMBED_TEXT_UNITS
    from graphrag_ray.llm.local_embedding import ngram_vector
    from graphrag_ray.storage.location import Store
    from graphrag_ray.storage.tables import write_table

    ctx = ctx_for(tmp_path)
    texts = [
        "李明在杭州开了一家咖啡店。",
        "Alice met Bob in Paris.",
        "李明在杭州开了一家咖啡店。",
        "Carol.",
        "Alice met Bob in Paris.",
    ]
    units = pl.DataFrame({"id": [f"tu{i}" for i in range(len(texts))], "text": texts})
    plan = EMBED_TEXT_UNITS.plan()
    items = plan.items(ctx, {"text_units": units}, 0, {})
    items = items.to_dicts() if isinstance(items, pl.DataFrame) else items
    assert sorted(it["text"] for it in items) == sorted(set(texts))
    assert [it["item_id"] for it in items] == ["tu0", "tu1", "tu3"]  # the first unit of each text
    failed = "Carol."
    yielded = pl.DataFrame(
        [
            {"id": it["item_id"], "target": it["target"], "text": it["text"], "vector": ngram_vector(it["text"], 8)}
            for it in items
            if it["text"] != failed
        ],
        schema={"id": pl.String, "target": pl.String, "text": pl.String, "vector": pl.List(pl.Float32)},
    )
    # as the executor leaves them: the vectors in partition files of the run (two partitions here)
    run = Store(tmp_path / "run")
    for p, part in enumerate([yielded.head(1), yielded.tail(-1)]):
        write_table(part, run.child(f"steps/embed_text_units/r0/p{p:05d}"), "embeddings", typed=False)
    spilled = SpilledRows(run, [f"steps/embed_text_units/r0/p{p:05d}/embeddings.parquet" for p in range(2)])
    out = plan.finish(ctx, {"text_units": units}, {"embeddings": spilled})["text_unit_embeddings"]
    assert out["id"].to_list() == ["tu0", "tu1", "tu2", "tu4"], "the failed text's unit has no vector"
    assert out["item_id"].to_list() == ["tu0", "tu1", "tu0", "tu1"]
    ids, unit_texts, matrix = (list(x) for x in zip(*vector_batches(run, out)))
    ids, unit_texts, matrix = sum(ids, []), sum(unit_texts, []), np.vstack(matrix)
    by_id = {i: {"text": t, "vector": list(v)} for i, t, v in zip(ids, unit_texts, matrix)}
    assert sorted(by_id) == ["tu0", "tu1", "tu2", "tu4"], "every row with a vector is published"
    assert by_id["tu2"]["vector"] == by_id["tu0"]["vector"] and by_id["tu4"]["vector"] == by_id["tu1"]["vector"]
    assert by_id["tu0"]["vector"] != by_id["tu1"]["vector"]
    assert by_id["tu0"]["vector"] == pytest.approx(ngram_vector(texts[0], 8))
    assert by_id["tu2"]["text"] == texts[2] and set(out["target"]) == {"text_unit_text"}


def test_each_community_lists_exactly_the_relationships_between_its_members(tmp_path):
    """Three dense clusters joined by single edges, split over two levels: every community at every level lists
    the relationships whose two ends are both its members, and no other."""
    import polars as pl

    from graphrag_ray.index.steps.communities import STEP as COMMUNITIES

    rng = random.Random(7)
    keys = [f"k{c}_{i}" for c in range(3) for i in range(12)]
    edges = {(a, b) for a in keys for b in keys if a < b and a[:3] == b[:3] and rng.random() < 0.5}
    edges |= {("k0_0", "k1_0"), ("k1_1", "k2_1")}
    ents = pl.DataFrame(
        {"id": [f"e-{k}" for k in keys], "key": keys, "title": keys, "text_unit_ids": [[f"tu-{k[:2]}"] for k in keys]}
    )
    rels = pl.DataFrame(
        {
            "id": [f"r-{a}-{b}" for a, b in sorted(edges)],
            "skey": [a for a, _ in sorted(edges)],
            "tkey": [b for _, b in sorted(edges)],
            "weight": [1.0] * len(edges),
            "text_unit_ids": [[f"tu-{a[:2]}"] for a, _ in sorted(edges)],
        }
    )
    docs = pl.DataFrame({"creation_date": ["2026-01-01"]})
    ctx = StepContext(Settings.model_validate({"cluster_graph": {"max_cluster_size": 8}}), tmp_path)
    table = COMMUNITIES.run(ctx, {"resolved_entities": ents, "resolved_relationships": rels, "documents": docs})[
        "communities"
    ]
    assert table["level"].max() >= 1, "the clusters were split again: two levels to check"
    key_of = dict(zip(ents["id"], ents["key"]))
    for row in table.iter_rows(named=True):
        members = {key_of[e] for e in row["entity_ids"]}
        expected = sorted(f"r-{a}-{b}" for a, b in edges if a in members and b in members)
        assert row["relationship_ids"] == expected, f"community {row['community']} at level {row['level']}"


def test_each_run_gets_steps_of_its_own():
    """A step's driver state (the reports an update revises, later rounds' items, carried vectors) is its run's:
    every run builds its steps afresh, so two runs in one process (the API, a server) never share it."""
    from graphrag_ray.index.pipeline import INDEX_METHODS, method_steps

    for method in INDEX_METHODS:
        first, second = method_steps(method), method_steps(method)
        assert [s.name for s in first] == INDEX_METHODS[method] == [s.name for s in second]
        assert all(a is not b and type(a) is type(b) for a, b in zip(first, second))
    reports = next(s for s in method_steps("standard") if s.name == "community_reports")
    assert reports.plan() is not reports.plan(), "and each run of a step a plan of its own"
