"""The community reports step: what an update revises and from what, what decides whether a report is carried,
the rounds reports are written in, and the plan that holds a run's state away from the shipped step."""

from pathlib import Path
from types import SimpleNamespace

from graphrag_ray.config.settings import Settings
from graphrag_ray.exec.step import StepContext


def test_a_report_revision_lists_only_what_changed_and_finds_the_community_a_new_number_came_from():
    """An update revises a changed community's report from the previous one: the rows added or with a new
    description, the rows removed (a removed entity's relationships go with it, unlisted), matched by number or, for a
    community whose members changed, by the previous community of its level that held most of them."""
    import polars as pl

    from graphrag_ray.index.operations.report_context import PreviousReports, changes_context

    titles = {f"e{i}": f"E{i}" for i in range(1, 9)}
    pairs = {"r1": ("e1", "e2"), "r2": ("e2", "e3"), "r3": ("e3", "e4"), "r4": ("e4", "e5"), "r5": ("e5", "e6")}
    previous = {
        "communities": pl.DataFrame(
            {
                "community": [5],
                "level": [0],
                "entity_ids": [[f"e{i}" for i in range(1, 7)]],
                "relationship_ids": [sorted(pairs)],
            }
        ),
        "community_reports": pl.DataFrame({"community": [5], "full_content": ["# E1 and E2\n\nthe old report"]}),
        "entities": pl.DataFrame(
            {
                "id": list(titles),
                "human_readable_id": list(range(8)),
                "title": list(titles.values()),
                "description": [f"d{i}" for i in range(1, 9)],
            }
        ),
        "relationships": pl.DataFrame(
            {
                "id": list(pairs),
                "human_readable_id": list(range(5)),
                "source": [titles[a] for a, _ in pairs.values()],
                "target": [titles[b] for _, b in pairs.values()],
                "description": [f"rd{i}" for i in range(1, 6)],
            }
        ),
    }

    class Ctx:
        def __init__(self, min_share=0.0, unsaid=(), removed=(), relationship_ids=None):
            self.settings = SimpleNamespace(community_reports=SimpleNamespace(revise_min_changed_share=min_share))
            self.unsaid, self.removed, self.relationship_ids = list(unsaid), list(removed), relationship_ids

        def previous_table(self, name):
            if name == "communities" and self.relationship_ids is not None:  # as the update that kept it left it
                return previous[name].with_columns(pl.Series("relationship_ids", [self.relationship_ids]))
            return previous[name]

        def previous_carried(self, step, table):
            assert (step, table) == ("community_reports", "reports")
            return pl.DataFrame(
                {
                    "community": [5],
                    "full_content": ["# E1 and E2\n\nthe old report"],
                    "changed_rows": [self.unsaid],
                    "removed_rows": [self.removed],
                    "_item_key": ["k"],
                }
            )

    def entity(i, description=None):
        return {
            "id": f"e{i}",
            "human_readable_id": i - 1,
            "title": f"E{i}",
            "description": description or f"d{i}",
            "degree": 2,
        }

    def relationship(rid, description=None):
        a, b = pairs.get(rid, ("e5", "e7"))
        return {
            "id": rid,
            "human_readable_id": int(rid[1:]) - 1,
            "source": titles[a],
            "target": titles[b],
            "description": description or f"rd{rid[1:]}",
            "combined_degree": 4,
        }

    known = PreviousReports(Ctx())  # revise on any change (min share 0)
    same = {
        "community": 5,
        "entities": [entity(i) for i in range(1, 7)],
        "relationships": [relationship(r) for r in sorted(pairs)],
    }
    assert known.revision(same, 0) is None, "nothing changed: nothing to revise"
    edited = {**same, "entities": [entity(i, "a new summary" if i == 2 else None) for i in range(1, 7)]}
    revision = known.revision(edited, 0)
    assert revision["report"].endswith("the old report") and [e["id"] for e in revision["entities"]] == ["e2"]
    assert revision["relationships"] == [] and revision["removed_entities"] == []
    text = changes_context(revision)
    assert "-----Entities-----" in text and "a new summary" in text and "Removed" not in text
    # e6 left (with r5), e7 joined (with r6): a new number, revised from community 5
    moved = {
        "community": 9,
        "entities": [entity(i) for i in (1, 2, 3, 4, 5, 7)],
        "relationships": [relationship(r) for r in ("r1", "r2", "r3", "r4", "r6")],
    }
    revision = known.revision(moved, 0)
    assert revision is not None and revision["report"].endswith("the old report")
    assert [e["id"] for e in revision["entities"]] == ["e7"] and [r["id"] for r in revision["relationships"]] == ["r6"]
    assert revision["removed_entities"] == [[5, "E6"]] and revision["removed_relationships"] == [], "r5 goes with E6"
    assert known.revision(moved, 1) is None, "no community of level 1 held its members"
    mostly_new = {
        "community": 9,
        "entities": [entity(i, "new") for i in range(1, 7)],
        "relationships": [relationship(r, "new") for r in sorted(pairs)],
    }
    assert known.revision(mostly_new, 0) is None, "more than half changed: written afresh"
    # a few descriptions changed, the same members and relationships: the report stays (revise_min_changed_share),
    # remembering the rows it was not told about; when those add up, the revision is told all of them
    keeping = PreviousReports(Ctx(min_share=0.2, unsaid=["e3"]))  # 11 rows: kept while at most 2 changed
    kept = keeping.revision(edited, 0)
    assert kept == {
        "keep": {
            "community": 5,
            "full_content": "# E1 and E2\n\nthe old report",
            "changed_rows": ["e2", "e3"],
            "removed_rows": [],
        }
    }, kept
    assert PreviousReports(Ctx(min_share=0.2)).revision(moved, 0)["report"], "4 of 11 rows moved: revised"
    adding_up = PreviousReports(Ctx(min_share=0.2, unsaid=["e3", "r1"])).revision(edited, 0)
    assert [e["id"] for e in adding_up["entities"]] == ["e2", "e3"] and [
        r["id"] for r in adding_up["relationships"]
    ] == ["r1"], adding_up
    # a member that joins (with its edge) or leaves is a few rows too: kept, the leaver remembered as it is told
    joined = {
        **same,
        "entities": same["entities"] + [entity(7)],
        "relationships": same["relationships"] + [relationship("r6")],
    }
    kept = PreviousReports(Ctx(min_share=0.2)).revision(joined, 0)["keep"]
    assert kept["changed_rows"] == ["e7", "r6"] and kept["removed_rows"] == [], kept
    left = {**same, "relationships": [relationship(r) for r in ("r1", "r2", "r3", "r4")]}  # r5 (E5-E6) left
    kept = PreviousReports(Ctx(min_share=0.2)).revision(left, 0)["keep"]
    assert kept["changed_rows"] == [] and kept["removed_rows"] == ['["relationship", "r5", 4, "E5", "E6"]'], kept
    # the next change that adds up is revised, told of the row that left in the update that kept the report
    remembered = PreviousReports(
        Ctx(min_share=0.2, unsaid=["e3"], removed=kept["removed_rows"], relationship_ids=["r1", "r2", "r3", "r4"])
    )
    revision = remembered.revision({**left, "entities": edited["entities"]}, 0)
    assert [e["id"] for e in revision["entities"]] == ["e2", "e3"], revision
    assert revision["removed_relationships"] == [[4, "E5", "E6"]] and revision["removed_entities"] == [], revision


def test_a_reports_carry_key_follows_its_members_and_descriptions_not_their_degrees():
    """Issue 15: a community whose members and descriptions are unchanged keeps its report in an update, even when
    its members' degrees (and so the order of its rows) moved because of an edge outside it."""
    from graphrag_ray.exec.carried import item_key
    from graphrag_ray.index.steps.community_reports import STEP as REPORTS

    def item(degrees, description="works in Oslo"):
        entities = [
            {
                "id": f"e{i}",
                "human_readable_id": i,
                "title": f"E{i}",
                "degree": d,
                "description": description if i == 1 else f"d{i}",
            }
            for i, d in enumerate(degrees)
        ]
        entities.sort(key=lambda e: (-e["degree"], e["human_readable_id"]))
        return {
            "item_id": "c-1",
            "community": 1,
            "entities": entities,
            "children": [],
            "relationships": [
                {
                    "id": "r1",
                    "human_readable_id": 0,
                    "source": "E0",
                    "target": "E1",
                    "description": "met",
                    "combined_degree": sum(degrees[:2]),
                }
            ],
        }

    def key(it):
        return item_key(REPORTS.carry_identity(it))

    assert key(item([3, 1, 2])) == key(item([1, 5, 2])), "degrees and row order are not what the report is about"
    assert key(item([3, 1, 2])) != key(item([3, 1, 2], "moved to Bergen")), "a new description is"
    assert item_key(item([3, 1, 2])) != item_key(item([1, 5, 2])), "by default the whole item decides"


def test_reports_that_need_no_sub_report_are_written_in_the_first_round_whatever_their_level():
    """A community's report waits for its sub-communities' reports only when its own rows do not fit the input
    budget: the others (every leaf, and parents whose rows fit) go in the first round, and the level rounds that
    follow hold only the parents that need their children's reports, deepest first."""
    import polars as pl

    from graphrag_ray.index.steps.community_reports import STEP as REPORTS

    def entity(i, text="short"):
        return {"id": f"e{i}", "human_readable_id": i, "title": f"E{i}", "description": text, "degree": 1}

    entities = pl.DataFrame([entity(i) for i in range(4)] + [entity(i, "long " * 400) for i in range(4, 8)])
    relationships = pl.DataFrame(
        schema={
            "id": pl.String,
            "human_readable_id": pl.Int64,
            "source": pl.String,
            "target": pl.String,
            "description": pl.String,
            "combined_degree": pl.Int64,
        }
    )

    def community(number, level, parent, children, members):
        return {
            "id": f"c{number}",
            "community": number,
            "level": level,
            "parent": parent,
            "children": children,
            "entity_ids": [f"e{i}" for i in members],
            "relationship_ids": [],
            "size": len(members),
        }

    communities = pl.DataFrame(
        [
            community(0, 0, -1, [2, 3], [0, 1, 2, 3]),  # its rows fit: no need to wait for 2 and 3
            community(1, 0, -1, [4, 5], [4, 5, 6, 7]),  # its rows do not: it waits for 4 and 5
            community(2, 1, 0, [], [0, 1]),
            community(3, 1, 0, [], [2, 3]),
            community(4, 1, 1, [], [4, 5]),
            community(5, 1, 1, [], [6, 7]),
        ],
        schema_overrides={"children": pl.List(pl.Int64)},
    )
    settings = Settings.model_validate({"community_reports": {"max_input_length": 1500}})
    ctx = StepContext(settings=settings, root=Path("."))
    tables = {"communities": communities, "entities_summarized": entities, "relationships_summarized": relationships}
    plan = REPORTS.plan()
    assert plan.rounds(ctx, tables) == 3
    first = plan.items(ctx, tables, 0, {})
    assert sorted(it["community"] for it in first) == [0, 2, 3, 4, 5]
    assert all(it["_first_round"] and it["children"] == [] for it in first)
    assert plan.items(ctx, tables, 1, {}) == [], "level 1's communities were all in the first round"
    reports = pl.DataFrame([{"community": c, "title": f"T{c}", "full_content": f"# T{c}"} for c in (2, 3, 4, 5)])
    last = plan.items(ctx, tables, 2, {"reports": reports})
    assert [it["community"] for it in last] == [1] and [c["report"]["community"] for c in last[0]["children"]] == [4, 5]
    assert last[0]["descendants"] and last[0]["descendants"] != first[0]["descendants"], (
        "its identity names what is below it"
    )
    regrouped = communities.with_columns(
        pl.when(pl.col("community") == 4)
        .then(pl.lit(["e4", "e5", "e6"]))
        .when(pl.col("community") == 5)
        .then(pl.lit(["e7"]))
        .otherwise(pl.col("entity_ids"))
        .alias("entity_ids")
    )
    again = REPORTS.plan().items(ctx, {**tables, "communities": regrouped}, 2, {"reports": reports})
    assert REPORTS.carry_identity(again[0]) != REPORTS.carry_identity(last[0]), (
        "its members and their descriptions are the same, but the communities below it were regrouped"
    )
    assert all(not it["descendants"] for it in first if it["community"] >= 2), "a leaf has nothing below it"
    # an update counts tokens where the bytes bound cannot tell: community 1's 8 KB of rows hold ~2,000 tokens
    from graphrag_ray.index.operations.report_context import rows_fit

    rows = [entity(i, "long " * 400) for i in range(4, 8)]
    assert not rows_fit(rows, [], 1500) and not rows_fit(rows, [], 1500, count=lambda text: len(text) // 4)
    assert rows_fit(rows, [], 2500, count=lambda text: len(text) // 4), "8 KB of text, about 2,000 tokens"
    # what the driver established travels with the item: the worker does not count those rows again
    assert first[0]["_rows_fit"] and not last[0]["_rows_fit"]

    def no_count(text):
        raise AssertionError("the worker counted rows the driver already found to fit")

    counted = {**first[0], "entities": rows, "_rows_fit": True}  # 8 KB: over the bytes bound of 1,500
    assert REPORTS.context(counted, 1500, no_count).count("long") == 1600
    assert REPORTS.context({**counted, "_rows_fit": False}, 1500, lambda text: 10**6) != REPORTS.context(
        counted, 1500, no_count
    ), "not established: counted, and cut"


def test_what_a_run_keeps_stays_on_its_plan_and_the_step_travels_to_workers_with_nothing(tmp_path):
    """The step goes to a worker with every partition (and the in-process pool's workers share it with the driver):
    an update's reports plan reads the previous version and keeps later rounds' items, and none of that is on the
    step; each run's plan is its own."""
    import pickle

    import polars as pl

    from graphrag_ray.index.steps.community_reports import STEP as REPORTS
    from graphrag_ray.index.steps.community_reports import ReportPlan

    settings = Settings.model_validate({"community_reports": {"max_input_length": 1500}})
    ctx = StepContext(settings=settings, root=Path("."))
    communities = pl.DataFrame(
        [
            {
                "id": "c0",
                "community": 0,
                "level": 0,
                "parent": -1,
                "children": [],
                "entity_ids": ["e0"],
                "relationship_ids": [],
                "size": 1,
            }
        ],
        schema_overrides={"children": pl.List(pl.Int64)},
    )
    entities = pl.DataFrame(
        [{"id": "e0", "human_readable_id": 0, "title": "E0", "description": "x" * 100_000, "degree": 1}]
    )
    relationships = pl.DataFrame(
        schema={
            "id": pl.String,
            "human_readable_id": pl.Int64,
            "source": pl.String,
            "target": pl.String,
            "description": pl.String,
            "combined_degree": pl.Int64,
        }
    )
    before = pickle.dumps(REPORTS)
    plan = REPORTS.plan()
    assert isinstance(plan, ReportPlan) and plan is not REPORTS.plan()
    items = plan.items(
        ctx,
        {"communities": communities, "entities_summarized": entities, "relationships_summarized": relationships},
        0,
        {},
    )
    assert [it["community"] for it in items] == [0] and plan.waiting is not None, "the plan keeps the run's items"
    assert vars(REPORTS) == {} and pickle.dumps(REPORTS) == before, "the step holds none of it"
