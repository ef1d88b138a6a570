"""`update`: a corpus that changes (documents added, edited, deleted) costs calls in proportion to the change, and the
result is the graph a full index of the final corpus would give."""

from __future__ import annotations

import json
import shutil

import networkx as nx
import polars as pl
import pytest
import yaml

from graphrag_ray import api
from graphrag_ray.simulate.process import SimulatorProcess
from graphrag_ray.storage.tables import read_table
from jobs.graph_compare import comparable_graph
from tests.helpers import check_communities, cli, cli_in_process, make_root, published_index, published_version
from tests.helpers import write_input as write

# three topics that share no name: a change in one must not touch the others
TOPICS = {
    "a": (["Alice Martin", "Bob Chen", "Carol Diaz"], ["Paris", "Lyon"], "Acme Corp"),
    "b": (["David Okafor", "Eva Novak", "Frank Li"], ["Lagos", "Abuja"], "Globex Inc"),
    "c": (["Hana Sato", "Ivan Petrov", "Julia Rossi"], ["Prague", "Brno"], "Initech Ltd"),
}


def document(topic: str, n: int, extra: str = "") -> str:
    people, places, org = TOPICS[topic]
    a, b = people[n % 3], people[(n + 1) % 3]
    p, q = places[n % 2], places[(n + 1) % 2]
    sentences = [
        f"In {p}, {a} met {b} to plan the {topic}{n} project of {org}.",
        f"{b} later travelled to {q}, where {a} had opened an office for {org}.",
        f"{people[(n + 2) % 3]} joined {a} in {p} to review the {topic}{n} budget.",
        f"The {topic}{n} project kept {b} busy in {q} for the whole season.",
    ]
    return " ".join(sentences + ([extra] if extra else []))


def embedded_texts(index) -> set[str]:
    ents = read_table(index, "entities")
    units = read_table(index, "text_units")
    reports = read_table(index, "community_reports")
    return (
        {f"{t}:{d}" for t, d in zip(ents["title"], ents["description"])}
        | set(units["text"])
        | set(reports["full_content"])
    )


@pytest.fixture()
def project(tmp_path):
    with SimulatorProcess() as sim:
        root = make_root(tmp_path / "project", sim.base_url, chunks={"size": 60, "overlap": 0})
        (root / "input").mkdir()
        for topic in TOPICS:
            for n in range(2):
                write(root, f"{topic}{n}.txt", document(topic, n))
        api.build_index(root=root)
        yield root, sim


def topic_of(title: str) -> str | None:
    for topic, (people, places, org) in TOPICS.items():
        if title.title() in people + places + [org] or title in (p.upper() for p in people + places + [org]):
            return topic
    return None


def test_adding_a_document_to_one_topic_pays_for_that_topic_only(project):
    root, sim = project
    before = published_index(root)
    old_reports = read_table(before, "community_reports")
    old_texts = embedded_texts(before)
    sim.reset()
    write(root, "a9.txt", document("a", 9, "Kevin Moore met Alice Martin in Lyon."))
    result = api.update_index(root=root)
    served = sim.stats()
    after = result.index
    new_units = read_table(after, "text_units").join(read_table(before, "text_units"), on="id", how="anti")
    assert new_units.height >= 1
    assert served["kind_extract_graph"] == new_units.height, "extraction calls for the new text units only"
    # reports: those of communities with no topic-a entity are the same rows, with no call
    ents = read_table(after, "entities")
    topic_b_c = set(ents.filter(pl.col("title").map_elements(topic_of, return_dtype=pl.String).is_in(["b", "c"]))["id"])
    comms = read_table(after, "communities")
    untouched = comms.filter(pl.col("entity_ids").list.eval(pl.element().is_in(list(topic_b_c))).list.all())
    assert untouched.height >= 2
    kept = read_table(after, "community_reports").filter(pl.col("community").is_in(untouched["community"].to_list()))
    old_kept = old_reports.filter(pl.col("community").is_in(untouched["community"].to_list()))
    assert kept.sort("id").equals(old_kept.sort("id")), "untouched topics keep their reports, ids and numbers"
    assert served.get("kind_community_report", 0) < comms.height
    # the work follows the change: what the previous version computed is carried from it, not even looked up
    steps = result.stats["steps"]
    assert steps["extract_graph"]["items"] == new_units.height
    assert steps["extract_graph"]["carried_items"] == read_table(before, "text_units").height
    assert steps["extract_graph"]["ledger"]["total"]["cache_hits"] == 0
    assert steps["community_reports"]["carried_items"] >= untouched.height
    assert steps["community_reports"]["items"] == served.get("kind_community_report", 0)
    for step in ("embed_text_units", "embed"):  # vectors of texts the previous version has come from its tables
        assert steps[step]["ledger"]["total"]["cache_hits"] == 0, step
    # embeddings: only texts never embedded before
    assert served["embedding_inputs"] == len(embedded_texts(after) - old_texts)
    changes = json.loads((after.local_path() / "changes.json").read_text())
    assert changes["tables"]["documents"] == {"added": ["input/a9.txt#0"], "changed": [], "removed": []}
    # the community Kevin Moore joined is the one Alice Martin was in, changed: same number, a revised report
    alice = read_table(before, "entities").filter(pl.col("title") == "ALICE MARTIN")["id"].item()

    def holding(index, entity_id):
        table = read_table(index, "communities").filter(pl.col("level") == 0)
        return table.filter(pl.col("entity_ids").list.contains(entity_id))["community"].item()

    kevin = ents.filter(pl.col("title") == "KEVIN MOORE")["id"].item()
    assert holding(after, kevin) == holding(after, alice) == holding(before, alice)
    assert holding(before, alice) in changes["tables"]["communities"]["changed"]
    assert holding(before, alice) in changes["tables"]["community_reports"]["changed"]
    assert "KEVIN MOORE" in set(ents["title"]) and changes["spent"]["calls"] == served["ok"]
    assert published_version(root) != before.location.rsplit("/", 1)[-1]


def test_deleting_a_document_calls_no_extraction_and_leaves_the_rest_as_it_was(project):
    root, sim = project
    before = published_index(root)
    sim.reset()
    (root / "input" / "b1.txt").unlink()
    after = api.update_index(root=root).index
    served = sim.stats()
    assert served.get("kind_extract_graph", 0) == 0 and served.get("kind_extract_glean", 0) == 0
    gone_units = set(
        read_table(before, "text_units").filter(
            pl.col("document_id").is_in(
                read_table(before, "documents").filter(pl.col("title") == "b1.txt")["id"].to_list()
            )
        )["id"]
    )
    for name in ("entities", "relationships"):
        rows = read_table(after, name)
        assert not any(set(ids) & gone_units for ids in rows["text_unit_ids"]), "its mentions are gone"
    # what it did not touch (topics a and c) is unchanged, byte for byte
    for name, key in (("entities", "title"), ("relationships", "source")):
        untouched = lambda df, key=key: df.filter(  # noqa: E731
            pl.col(key).map_elements(topic_of, return_dtype=pl.String).is_in(["a", "c"])
        ).sort("id")
        assert untouched(read_table(after, name)).equals(untouched(read_table(before, name))), name
    changes = json.loads((after.local_path() / "changes.json").read_text())
    assert changes["tables"]["documents"]["removed"] == ["input/b1.txt#0"]


def test_add_edit_delete_equals_a_full_index_of_the_final_corpus_and_versions_are_kept(project, tmp_path):
    root, sim = project
    write(root, "c7.txt", document("c", 7, "Leo Brandt met Hana Sato in Brno."))
    api.update_index(root=root)
    sim.reset()
    write(root, "a1.txt", document("a", 1) + " Carol Diaz signed the lease in Lyon.")  # the last unit changes
    edited = api.update_index(root=root)
    served = sim.stats()
    changes = json.loads((edited.index.local_path() / "changes.json").read_text())
    assert changes["tables"]["documents"]["changed"] == ["input/a1.txt#0"]
    assert changes["tables"]["text_units"]["added"] and not changes["tables"]["text_units"]["changed"]
    assert served.get("kind_extract_graph", 0) == len(changes["tables"]["text_units"]["added"]), (
        "only the changed text units are extracted (the others keep their ids)"
    )
    (root / "input" / "b0.txt").unlink()
    final = api.update_index(root=root)
    check_communities(final.index)

    scratch = make_root(tmp_path / "scratch", sim.base_url, chunks={"size": 60, "overlap": 0})
    shutil.copytree(root / "input", scratch / "input")
    settings = yaml.safe_load((scratch / "settings.yaml").read_text())
    settings["cache"] = {"base_dir": str(root / "cache")}  # the same cache
    (scratch / "settings.yaml").write_text(yaml.safe_dump(settings))
    full = api.build_index(root=scratch)
    assert comparable_graph(final.index) == comparable_graph(full.index)

    versions = api.list_versions(root)
    assert len(versions) == 3 and versions[0]["current"] and versions[0]["kind"] == "update"
    done = cli_in_process("versions", "--root", str(root))
    assert done.returncode == 0 and versions[0]["version"] in done.stdout
    older = versions[1]["path"]
    answer = cli("query", "--root", str(root), "--data", older, "--method", "local", "--context-only", "Hana Sato")
    assert answer.returncode == 0 and "HANA SATO" in answer.stdout
    # What people look at follows the index: the report lists what each version changed, and exports read the
    # published version (or an older one with --data), never a snapshot left behind by an earlier run.
    report = api.write_index_report(root, tmp_path / "report").read_text()
    removed = versions[0]["changes"]["documents"]["removed"]
    assert f"{versions[0]['version']} (published) | update |" in report and f"-{removed} |" in report
    for version in (versions[0], versions[1]):
        data = None if version["current"] else version["path"]
        graphml = api.export_graph(root, "graphml", tmp_path / version["version"], data=data)[0]
        assert nx.read_graphml(graphml).number_of_nodes() == version["rows"]["entities"]

    unchanged = cli("update", "--root", str(root))
    assert unchanged.returncode == 0 and "nothing to update" in unchanged.stdout
    text = (root / "settings.yaml").read_text().replace("size: 60", "size: 80")
    (root / "settings.yaml").write_text(text)
    refused = cli("update", "--root", str(root))
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.returncode == 1 and len(lines) == 1 and "run a full `graphrag-ray index`" in lines[0]


def test_an_update_starts_where_the_previous_run_left_off_with_the_provider(tmp_path):
    """A batch job's first call to a model goes alone (its answer tells the provider's limits), once per job - not
    once per worker or step. What the build learned is kept with the index: the update's calls go at once, paced by
    the limits the provider announced, and a model whose endpoint changed since is probed again."""
    with SimulatorProcess(latency=0.3, tpm=2_000_000, rpm=10_000) as sim:
        root = make_root(tmp_path / "p", sim.base_url, chunks={"size": 60, "overlap": 0})
        (root / "input").mkdir()
        for n in range(2):
            write(root, f"a{n}.txt", document("a", n))
        built = api.build_index(root=root)
        probes = {k: v for k, v in sim.stats().items() if k.startswith("before_first_answer_")}
        assert probes and set(probes.values()) == {1}, f"the build probes each model once: {probes}"
        known = built.stats["provider_limits"]
        assert set(known) == {"default_chat", "default_embedding"}
        assert known["default_chat"]["learned_tpm"] == 2_000_000 and known["default_chat"]["refusals"] == 0
        assert sim.base_url not in json.dumps(known), "the endpoint is kept as a digest"
        for n in range(2, 5):
            write(root, f"a{n}.txt", document("a", n, f"Person{n} Quinn met Alice Martin in Lyon."))
        sim.reset()
        updated = api.update_index(root=root)
        served = sim.stats()
    assert updated.stats["started_warm"] == ["default_chat", "default_embedding"]
    new_units = updated.stats["steps"]["extract_graph"]["items"]
    chat_burst = [v for k, v in served.items() if k.startswith("before_first_answer_") and "embedding" not in k]
    assert new_units >= 3 and chat_burst == [new_units], (
        f"every new text unit's extraction went at once: {chat_burst} of {new_units}"
    )
    assert served.get("429_limit", 0) == 0

    from graphrag_ray.config.load import load_settings
    from graphrag_ray.llm.concurrency import warm_start
    from graphrag_ray.llm.ratelimit import LocalRateLimiter

    models = load_settings(root).models
    moved = {**known, "default_chat": {**known["default_chat"], "endpoint": "0" * 16}}
    limiter = LocalRateLimiter()
    assert warm_start(limiter, moved, models) == ["default_embedding"], "a moved endpoint is probed again"
    refused = {"default_chat": {**known["default_chat"], "learned_rpm": None, "learned_tpm": None, "refusals": 3}}
    assert warm_start(LocalRateLimiter(), refused, models) == [], "429s and no announced limits: probe again"


def test_a_small_update_runs_in_this_process_when_the_whole_corpus_would_go_to_ray(tmp_path, monkeypatch):
    """`workers.executor: auto` weighs what a run reads anew: a full index of a corpus above local_max_input_mb
    starts Ray, an update that adds one short document to it runs in the command's own process (Ray's start-up
    would cost more than the work) - and so it does with a cluster to join, where a full index would use the
    cluster (the actors' start-up is most of what it would wait on). Each version keeps its input manifest
    (inputs.json) for the next update."""
    from graphrag_ray.exec.runtime import choose_backend
    from graphrag_ray.index.pipeline import changed_input_bytes

    with SimulatorProcess() as sim:
        root = make_root(
            tmp_path / "p",
            sim.base_url,
            chunks={"size": 60, "overlap": 0},
            workers={"executor": "local", "local_max_input_mb": 0.001},
        )
        (root / "input").mkdir()
        for topic in TOPICS:
            for n in range(3):
                write(root, f"{topic}{n}.txt", document(topic, n))
        built = api.build_index(root=root)
        manifest = json.loads((built.index.local_path() / "inputs.json").read_text())
        assert sorted(m[0] for m in manifest) == sorted(f"input/{p.name}" for p in (root / "input").iterdir())
        corpus = changed_input_bytes(manifest, None)
        assert corpus > 0.001 * 2**20, "a full index of this corpus would start Ray under `auto`"
        settings = yaml.safe_load((root / "settings.yaml").read_text())
        settings["workers"]["executor"] = "auto"  # workers settings do not change what is computed
        (root / "settings.yaml").write_text(yaml.safe_dump(settings))
        write(root, "a9.txt", "Kevin Moore met Alice Martin in Lyon.")
        done = cli("update", "--root", str(root))
        assert done.returncode == 0, done.stderr[-2000:]
        stats = json.loads((published_index(root).local_path() / "stats.json").read_text())
        assert stats["kind"] == "update" and stats["executor"] == "local", stats.get("executor")
        now = json.loads((published_index(root).local_path() / "inputs.json").read_text())
        assert changed_input_bytes(now, manifest) == len(b"Kevin Moore met Alice Martin in Lyon.")
        assert changed_input_bytes(manifest, now) == 0, "a file that left reads nothing anew"
        # a cluster to join, as a submitted job sees it (not by patching ray_running: the in-process workers would
        # then ask Ray for their node, which starts Ray in this process and leaves it dead after the test)
        monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:9")
        assert choose_backend("auto", corpus, 0.001) == "ray", "a full index joins the cluster"
        write(root, "a10.txt", "Alice Martin left Lyon for Oslo.")
        again = api.update_index(root=root)
    assert again.stats["kind"] == "update" and again.stats["executor"] == "local", again.stats.get("executor")
    assert "input/a10.txt" in {m[0] for m in json.loads((again.index.local_path() / "inputs.json").read_text())}
