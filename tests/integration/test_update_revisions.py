"""Updates that revise instead of rewriting: a changed report from its previous one and the rows that changed, a
report kept through a few changed descriptions, a hub's summary from its previous one and the changed
descriptions."""

from __future__ import annotations

import json
import math
import shutil

import polars as pl

from graphrag_ray import api
from graphrag_ray.simulate.process import SimulatorProcess
from graphrag_ray.storage.tables import read_table
from jobs.graph_compare import comparable_graph
from tests.helpers import check_communities, make_root, published_index
from tests.helpers import write_input as write

# three topics that share no name: a change in one must not touch the others
PEOPLE = [
    "Anna Berg",
    "Bruno Costa",
    "Clara Dahl",
    "Dmitri Egorov",
    "Elena Fischer",
    "Felix Grant",
    "Greta Holm",
    "Hugo Ibsen",
    "Iris Jansen",
    "Jonas Keller",
    "Karin Lund",
    "Lars Moen",
]


def crew_document(n: int) -> str:
    """One large community: twelve people of one firm in one city, each document pairing a few of them."""
    a, b, c = PEOPLE[n % 12], PEOPLE[(n + 1) % 12], PEOPLE[(n + 5) % 12]
    return (
        f"In Oslo, {a} met {b} to plan the north{n} survey of Umbrella Group. {b} later worked with {c} in "
        f"Oslo on the north{n} survey. {c} reported to {a} about the north{n} survey for Umbrella Group."
    )


def test_an_update_revises_a_large_changed_report_from_the_previous_one(tmp_path):
    """A community that changed in part is revised from its previous report and only the rows that changed: the
    prompt follows the change, not the community's size; with `revise_on_update: false` it is written afresh."""
    with SimulatorProcess() as sim:
        roots = {}
        for name, revise in (("revising", True), ("afresh", False)):
            root = make_root(
                tmp_path / name,
                sim.base_url,
                chunks={"size": 80, "overlap": 0},
                community_reports={"revise_on_update": revise},
                # every summary the new document touches is written again: the community's change is big enough
                summarize_descriptions={"keep_max_added_share": 0},
            )
            (root / "input").mkdir()
            for n in range(12):
                write(root, f"north{n}.txt", crew_document(n))
            api.build_index(root=root)
            roots[name] = root
        spent = {}
        for name, root in roots.items():
            before = published_index(root)
            write(
                root, "north99.txt", "In Oslo, Anna Berg met Mona Nilsen to plan the north99 survey of Umbrella Group."
            )
            sim.reset()
            result = api.update_index(root=root)
            served = sim.stats()
            steps = result.stats["steps"]["community_reports"]
            spent[name] = (
                served.get("kind_community_report_revision", 0),
                served.get("kind_community_report", 0),
                steps["ledger"]["total"]["prompt_tokens"],
                steps["events"].get("revised", 0),
            )
            after = result.index
            reports, comms = read_table(after, "community_reports"), read_table(after, "communities")
            assert sorted(reports["community"]) == sorted(comms["community"]), "every community has its report"
            check_communities(after)
            old = read_table(before, "community_reports")
            changed = reports.join(old, on=["community", "full_content"], how="anti")
            assert changed.height >= 1 and "MONA NILSEN" in set(read_table(after, "entities")["title"])
            written = json.loads((after.local_path() / "changes.json").read_text())["reports_written"]
            assert written["revised"] == spent[name][3], written
            assert written["afresh"] + written["revised"] + written["kept_despite_small_change"] == steps["items"]
        revisions, fresh, tokens, counted = spent["revising"]
        assert revisions >= 1 and counted == revisions, spent
        assert spent["afresh"][0] == 0 and spent["afresh"][3] == 0
        assert revisions + fresh <= spent["afresh"][1], spent
        assert tokens < spent["afresh"][2], f"revising sends fewer prompt tokens: {spent}"


def test_a_report_stays_through_a_few_changed_descriptions_until_they_add_up(tmp_path):
    """A community whose members and relationships are the same and of which one entity's description changed (a
    mention in a document elsewhere) keeps its report with no call, remembering that row; a later update that changes
    a few more, too few alone but enough with it (`revise_min_changed_share`), writes the report again."""
    SHARE = 0.05  # the crew's community has ~60 rows: a revision at 3 changed

    def leaf_of(index, title):
        ents = read_table(index, "entities")
        wanted = ents.filter(pl.col("title") == title)["id"].item()
        comms = read_table(index, "communities").filter(pl.col("entity_ids").list.contains(wanted))
        return comms.sort("level").tail(1).row(0, named=True), dict(zip(ents["id"], ents["title"]))

    def carried_report(index, community):
        return (
            read_table(index.child("carried/community_reports"), "reports")
            .filter(pl.col("community") == community)
            .row(0, named=True)
        )

    with SimulatorProcess() as sim:
        root = make_root(
            tmp_path / "crew",
            sim.base_url,
            chunks={"size": 80, "overlap": 0},
            community_reports={"revise_min_changed_share": SHARE},
        )
        (root / "input").mkdir()
        for n in range(12):
            write(root, f"north{n}.txt", crew_document(n))
        built = api.build_index(root=root).index
        leaf, titles = leaf_of(built, "ANNA BERG")
        rows = len(leaf["entity_ids"]) + len(leaf["relationship_ids"])
        members = sorted(titles[e] for e in leaf["entity_ids"] if titles[e] in {p.upper() for p in PEOPLE})
        needed = math.ceil(SHARE * rows - 1e-9)  # changed rows that make SHARE of the community's
        assert needed >= 2 and len(members) > needed, (rows, members)
        write(root, "retired0.txt", "Anna Berg retired in spring.")
        sim.reset()
        first = api.update_index(root=root)
        written = json.loads((first.index.local_path() / "changes.json").read_text())["reports_written"]
        assert written["kept_despite_small_change"] >= 1, written
        after, _ = leaf_of(first.index, "ANNA BERG")
        assert after["entity_ids"] == leaf["entity_ids"], "the same community"
        report = carried_report(first.index, leaf["community"])
        assert report["full_content"] == carried_report(built, leaf["community"])["full_content"]
        assert [titles[i] for i in report["changed_rows"]] == ["ANNA BERG"], report["changed_rows"]
        others = [m for m in members if m != "ANNA BERG"][: needed - 1]
        for k, title in enumerate(others):  # one too few alone, enough with Anna Berg's
            write(root, f"retired{k + 1}.txt", f"{title.title()} retired in spring.")
        second = api.update_index(root=root)
        report = carried_report(second.index, leaf["community"])
        assert (
            report["changed_rows"] == []
            and report["full_content"] != carried_report(built, leaf["community"])["full_content"]
        ), "written again, told every row changed since"
        assert "retired" in report["full_content"]


def test_an_update_revises_a_hub_s_summary_from_its_previous_one_and_the_changed_descriptions(tmp_path):
    """A hub (Umbrella Group, in every document) that gains one document's mentions and loses another's is
    revised from its previous summary, the added descriptions and the removed ones - not from all of its
    descriptions again - and ends with the description set a full build of the final corpus gives. The update's
    revisions share calls (`revisions_per_call`): fewer calls than revised items. With `revise_on_update: false`
    everything is summarised afresh."""
    with SimulatorProcess() as sim:
        roots = {}
        for name, revise in (("revising", True), ("afresh", False)):
            root = make_root(
                tmp_path / name,
                sim.base_url,
                chunks={"size": 80, "overlap": 0},
                summarize_descriptions={"revise_on_update": revise},
            )
            (root / "input").mkdir()
            for n in range(36):  # the hub's descriptions outweigh its summary (a real model's: max_length words)
                write(root, f"north{n}.txt", crew_document(n))
            api.build_index(root=root)
            roots[name] = root
        spent = {}
        for name, root in roots.items():
            write(
                root,
                "north99.txt",
                "In Oslo, Anna Berg met Mona Nilsen to plan the north99 survey of Umbrella "
                "Group. Mona Nilsen reported to Anna Berg about the north99 survey for "
                "Umbrella Group.",
            )
            (root / "input" / "north3.txt").unlink()
            hub_before = read_table(published_index(root), "entities").filter(pl.col("title") == "UMBRELLA GROUP")
            sim.reset()
            result = api.update_index(root=root)
            served = sim.stats()
            steps = result.stats["steps"]["summarize_descriptions"]
            revision_calls = served.get("kind_summarize_update", 0) + served.get("kind_summarize_update_batch", 0)
            spent[name] = (revision_calls, steps["ledger"]["total"]["prompt_tokens"], steps["ledger"]["total"]["calls"])
            written = json.loads((result.index.local_path() / "changes.json").read_text())["summaries_written"]
            assert written["revised"] == steps["events"].get("revised", 0), (written, steps["events"])
            if name == "revising":
                assert served.get("kind_summarize_update_batch", 0) >= 1, served
                calls = revision_calls + served.get("kind_summarize", 0)
                assert written["revised"] >= 2 and 1 <= calls < written["revised"] + written["afresh"], (
                    written,
                    served,
                )
                assert "alone_after_shared_call" not in steps["events"], steps["events"]
            hub = read_table(result.index, "entities").filter(pl.col("title") == "UMBRELLA GROUP")
            if name == "revising":  # what came is said, what went is not; the description set is the final
                # corpus's, as a full build gives it
                assert "north99 survey" in hub["description"].item()
                if "north3 survey " in hub_before["description"].item():
                    assert "north3 survey " not in hub["description"].item()
                scratch = make_root(tmp_path / "scratch", sim.base_url, chunks={"size": 80, "overlap": 0})
                shutil.copytree(root / "input", scratch / "input")
                full = api.build_index(root=scratch)
                sources = [
                    read_table(index.child("carried/summarize_descriptions"), "summaries")
                    .filter(pl.col("id") == hub["id"].item())["sources"]
                    .item()
                    .to_list()
                    for index in (result.index, full.index)
                ]
                assert sources[0] == sources[1] and len(sources[0]) >= 8
        assert spent["revising"][0] >= 1 and spent["afresh"][0] == 0, spent
        assert spent["revising"][1] < spent["afresh"][1], f"revising sends fewer prompt tokens: {spent}"


def test_a_hub_that_only_gained_a_few_descriptions_keeps_its_summary_until_the_additions_grow(tmp_path):
    """A hub named in one new document keeps its summary with no call (`keep_max_added_share`): its description
    does not change, so neither do the reports above it, nor its vector. The summary still names what it was
    written from, so once the additions grow past the share the revision is told all of them, the first one
    too."""
    with SimulatorProcess() as sim:
        root = make_root(tmp_path / "p", sim.base_url, chunks={"size": 80, "overlap": 0})
        (root / "input").mkdir()
        for n in range(36):
            write(root, f"north{n}.txt", crew_document(n))
        built = api.build_index(root=root)
        original = comparable_graph(built.index)  # (the oldest versions are let go as updates publish)

        def hub(index) -> tuple[str, list[str]]:
            row = read_table(index, "entities").filter(pl.col("title") == "UMBRELLA GROUP")
            sources = (
                read_table(index.child("carried/summarize_descriptions"), "summaries")
                .filter(pl.col("id") == row["id"].item())["sources"]
                .item()
                .to_list()
            )
            return row["description"].item(), sources

        def survey(n: int) -> str:
            return f"In Oslo, Mona Nilsen planned the south{n} survey of Umbrella Group with Per Olsen."

        write(root, "south1.txt", survey(1))
        sim.reset()
        first = api.update_index(root=root)
        assert hub(first.index) == hub(built.index), "the hub's summary and what it was written from stay"
        written = json.loads((first.index.local_path() / "changes.json").read_text())["summaries_written"]
        assert written["kept_despite_small_change"] >= 1, written
        assert "south1" not in hub(first.index)[0]
        scratch = make_root(tmp_path / "scratch", sim.base_url, chunks={"size": 80, "overlap": 0})
        shutil.copytree(root / "input", scratch / "input")
        full = api.build_index(root=scratch)
        assert comparable_graph(first.index) == comparable_graph(full.index), (
            "a kept summary stands for the description set a full build's does (its sources and what it gained)"
        )

        for n in range(2, 6):
            write(root, f"south{n}.txt", survey(n))
        second = api.update_index(root=root)
        description, sources = hub(second.index)
        assert description != hub(built.index)[0] and "south5" in description
        assert "south1" in description, "the addition kept unsaid before is told to the revision"
        assert len(sources) == len(hub(built.index)[1]) + 5

        for n in range(1, 6):  # the round trip: the graph is the build's again
            (root / "input" / f"south{n}.txt").unlink()
        reverted = api.update_index(root=root)
        assert comparable_graph(reverted.index) == original
