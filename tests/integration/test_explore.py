"""Looking at an index: `export` (GraphML, GEXF, CSV, Neo4j), `view` (one offline HTML file) and `report`
(Markdown + PNG), on the coffee-shop example built with the no-LLM method."""

from __future__ import annotations

import csv
import http.server
import json
import os
import re
import shutil
import subprocess
import threading
from html.parser import HTMLParser
from pathlib import Path

import igraph as ig
import networkx as nx
import polars as pl
import pytest

from graphrag_ray import api
from graphrag_ray.storage.tables import current_index, read_table
from tests.helpers import cli, cli_in_process

from .test_fast import example_root

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def coffee(tmp_path_factory, ray_session, no_key):
    root = example_root(tmp_path_factory.mktemp("explore"), "coffee_shop")
    api.build_index(root=root, method="fast")
    folder = current_index(root / "output")
    tables = {
        name: read_table(folder, name) for name in ("entities", "relationships", "communities", "community_reports")
    }
    return root, tables


def membership(tables: dict, level: int) -> dict[str, int]:
    rows = (
        tables["communities"].filter(pl.col("level") == level).select("community", "entity_ids").explode("entity_ids")
    )
    return dict(zip(rows["entity_ids"].to_list(), rows["community"].to_list()))


def test_graphml_and_gexf_hold_every_entity_and_relationship_with_its_community(coffee, tmp_path):
    root, tables = coffee
    entities, relationships = tables["entities"], tables["relationships"]
    written = api.export_graph(root, "graphml", tmp_path / "graphml")
    g = ig.Graph.Read_GraphML(str(written[0]))
    assert (g.vcount(), g.ecount()) == (entities.height, relationships.height)
    expected = membership(tables, 0)
    by_title = {v["title"]: v for v in g.vs}
    for row in entities.iter_rows(named=True):
        node = by_title[row["title"]]
        assert node["entity_id"] == row["id"] and node["type"] == row["type"] and node["degree"] == row["degree"]
        assert node["community"] == expected.get(row["id"], -1) == node["community_level_0"]
    assert sorted(g.es["weight"]) == sorted(relationships["weight"].to_list())

    gexf_file = api.export_graph(root, "gexf", tmp_path / "gexf")[0]
    gexf = nx.read_gexf(gexf_file)
    assert (gexf.number_of_nodes(), gexf.number_of_edges()) == (entities.height, relationships.height)
    assert "networkx_key" not in gexf_file.read_text(encoding="utf-8"), "no attribute of the writer's own"
    assert {d["relationship_id"] for *_, d in gexf.edges(data=True)} == set(relationships["id"].to_list())
    titles = set(entities["title"].to_list())
    assert set(gexf.nodes) == titles and all(s in titles and t in titles for s, t in gexf.edges())


def read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def test_neo4j_files_follow_the_import_tools_header_format_and_link_up(coffee, tmp_path):
    root, tables = coffee
    done = cli_in_process("export", "--root", str(root), "--format", "neo4j", "--out", str(tmp_path / "neo"))
    assert done.returncode == 0, done.stderr
    out = tmp_path / "neo"
    header, entity_rows = read_csv(out / "entities.csv")
    assert header[0] == "entityId:ID(Entity)" and "degree:int" in header and "title" in header
    assert len(entity_rows) == tables["entities"].height
    entity_ids = {row[0] for row in entity_rows}
    header, rel_rows = read_csv(out / "relationships.csv")
    assert header[:2] == [":START_ID(Entity)", ":END_ID(Entity)"] and "weight:float" in header
    assert len(rel_rows) == tables["relationships"].height
    assert all(row[0] in entity_ids and row[1] in entity_ids for row in rel_rows)
    header, community_rows = read_csv(out / "communities.csv")
    assert header[0] == "communityId:ID(Community)" and "level:int" in header
    community_ids = {row[0] for row in community_rows}
    header, member_rows = read_csv(out / "in_community.csv")
    assert header == [":START_ID(Entity)", ":END_ID(Community)"] and member_rows
    assert all(e in entity_ids and c in community_ids for e, c in member_rows)
    typed = [h for h in header if ":" in h and not h.startswith(":")]
    assert all(re.fullmatch(r"\w+:(ID\(\w+\)|int|float)", h) for h in typed)
    script = (out / "import.sh").read_text()
    assert "neo4j-admin database import full neo4j" in script
    assert f"--nodes=Entity={out / 'entities.csv'}" in script and "--multiline-fields=true" in script
    assert f"bash {out / 'import.sh'}" in done.stdout

    plain = api.export_graph(root, "csv", tmp_path / "csv")
    assert [p.name for p in plain] == ["nodes.csv", "edges.csv", "communities.csv"]
    assert pl.read_csv(plain[1]).height == tables["relationships"].height


class References(HTMLParser):
    """Every address the page would load: src/href attributes, <link> elements, CSS url(...)."""

    def __init__(self):
        super().__init__()
        self.addresses, self.scripts, self._in_script = [], [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.addresses += [attrs[a] for a in ("src", "href", "data") if attrs.get(a)]
        if tag == "link":
            self.addresses.append(f"<link {attrs}>")
        self._in_script = attrs.get("type", "text/javascript") if tag == "script" else None

    def handle_data(self, data):
        if self._in_script is not None:
            self.scripts.append((self._in_script, data))
            self._in_script = None


def test_the_view_is_one_file_that_loads_nothing_from_outside(coffee, tmp_path):
    root, tables = coffee
    done = cli("view", "--root", str(root), "--out", str(tmp_path / "g.html"))
    assert done.returncode == 0, done.stderr
    html = (tmp_path / "g.html").read_text(encoding="utf-8")
    page = References()
    page.feed(html)
    assert page.addresses == []
    assert not re.findall(r"url\(\s*['\"]?(?!data:)[a-z]+:", html), "CSS must not fetch anything"
    assert not re.search(r"@import|XMLHttpRequest|fetch\(", html.split('id="graph-data"')[1])
    data = json.loads(next(text for kind, text in page.scripts if kind == "application/json"))
    assert data["total_entities"] == tables["entities"].height == len(data["entities"]) == data["shown"]
    assert len(data["edges"]) == tables["relationships"].height
    assert {e["title"] for e in data["entities"]} == set(tables["entities"]["title"].to_list())
    assert all("x" in e and "y" in e for e in data["entities"])
    assert {c["community"] for c in data["communities"]} == set(tables["community_reports"]["community"].to_list())
    app = page.scripts[-1][1]
    assert "new vis.Network" in app
    if shutil.which("node"):  # the page's own script is valid JavaScript
        (tmp_path / "app.js").write_text(app, encoding="utf-8")
        checked = subprocess.run(["node", "--check", str(tmp_path / "app.js")], capture_output=True, text=True)
        assert checked.returncode == 0, checked.stderr


def test_a_large_graph_draws_its_top_entities_and_keeps_the_rest_searchable(coffee, tmp_path):
    root, tables = coffee
    html = api.write_graph_view(root, tmp_path / "top.html", max_nodes=5).read_text(encoding="utf-8")
    data = json.loads(html.split('id="graph-data">', 1)[1].split("</script>", 1)[0])
    assert data["shown"] == 5 and len(data["entities"]) == tables["entities"].height
    degrees = [e["degree"] for e in data["entities"]]
    assert degrees == sorted(degrees, reverse=True)
    assert all(a < 5 and b < 5 for a, b, *_ in data["edges"])
    assert all(("x" in e) == (e["i"] < 5) for e in data["entities"])
    again = api.write_graph_view(root, tmp_path / "again.html", max_nodes=5).read_text(encoding="utf-8")
    assert again == html, "the same index draws the same picture (seeded layout)"


def test_the_report_has_counts_charts_and_failures(coffee, tmp_path):
    root, tables = coffee
    done = cli_in_process("report", "--root", str(root), "--out", str(tmp_path / "rep"))
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "rep" / "report.md").read_text(encoding="utf-8")
    assert f"| entities | {tables['entities'].height:,} |" in text
    assert f"| relationships | {tables['relationships'].height:,} |" in text
    assert "| chunk |" in text and "## Failures" in text and "## Versions" in text
    for image in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text):
        assert (tmp_path / "rep" / image).read_bytes()[:8] == PNG
    assert {"entity_types.png", "degree_distribution.png", "community_sizes.png", "steps.png"} <= {
        p.name for p in (tmp_path / "rep").iterdir()
    }


def test_mistakes_print_one_line(coffee, tmp_path):
    root, _ = coffee
    for args, code, words in (
        (("export", "--format", "dot"), 2, "unknown export format 'dot'"),
        (("export", "--level", "-1"), 2, "--level -1: a level is 0"),
        (("view", "--max-nodes", "0"), 2, "--max-nodes"),
        (("report", "--data", str(tmp_path / "nothing")), 1, "nothing: no such folder"),
    ):
        done = cli_in_process(args[0], "--root", str(root), *args[1:])
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert done.returncode == code and len(lines) == 1 and words in lines[0], (args, done.stderr)
    # a level deeper than the deepest is the deepest, as for `query --community-level` (one rule)
    done = cli("view", "--root", str(root), "--level", "7", "--out", str(tmp_path / "deep.html"))  # a log line
    assert done.returncode == 0 and "deeper than the index's deepest level" in done.stderr, done.stderr
    empty = tmp_path / "empty"
    api.init_project(empty)  # a project that was never indexed
    done = cli_in_process("view", "--root", str(empty))
    assert done.returncode == 1 and "no index at" in done.stderr and "Traceback" not in done.stderr


class Tracker(http.server.BaseHTTPRequestHandler):
    """A loopback server that counts every request a rendered page makes to it (an image fetched on load)."""

    hits: list[str] = []

    def do_GET(self):
        Tracker.hits.append(self.path)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def tracker():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Tracker)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


HOSTILE_NAME = "EVIL<script>document.body.setAttribute('data-pwned','1')</script><!--"
HOSTILE_TEXT = (
    "a page about <!--<script> tags</script> and <img src=x "
    "onerror=\"document.body.setAttribute('data-pwned','2')\"> & more"
    # terminal control: an unterminated OSC (retitles, then swallows the screen), CSI, a bell, C0 and C1 bytes
    "\x1b]0;pwned\x1b[2J\x07\x01\x08\x0b\x9b31m\x7f end"
)
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def markdown_payload(tracker: str) -> str:
    """Markdown that acts when rendered: a script link, an image fetched on load, an autolink, a reference image."""
    return (
        f"[click me](javascript:alert(4)) ![pixel]({tracker}/image.png) <{tracker}/autolink> "
        f"![ref][t] <img src='{tracker}/html.png'> **bold** `code`"
    )


@pytest.fixture(scope="module")
def hostile(coffee, tmp_path_factory, tracker):
    """The coffee index with one entity named and typed, and one description and report written, as a model might
    copy them from a corpus about web pages."""
    from graphrag_ray.storage.tables import write_table

    markdown_text = markdown_payload(tracker)

    root = tmp_path_factory.mktemp("hostile") / "root"
    shutil.copytree(coffee[0], root)
    index = current_index(root / "output")
    entities, relationships = read_table(index, "entities"), read_table(index, "relationships")
    victim = entities.sort("degree", descending=True)["title"][0]
    rename = pl.when(pl.col("title") == victim).then(pl.lit(HOSTILE_NAME)).otherwise(pl.col("title"))
    write_table(
        entities.with_columns(
            rename.alias("title"),
            pl.lit(HOSTILE_TEXT).alias("description"),
            pl.when(pl.col("title") == victim).then(pl.lit(markdown_text)).otherwise(pl.col("type")).alias("type"),
        ),
        index,
        "entities",
    )
    write_table(
        relationships.with_columns(
            *(
                pl.when(pl.col(c) == victim).then(pl.lit(HOSTILE_NAME)).otherwise(pl.col(c)).alias(c)
                for c in ("source", "target")
            )
        ),
        index,
        "relationships",
    )
    reports = read_table(index, "community_reports")
    write_table(
        reports.with_columns(
            pl.lit(HOSTILE_NAME + " " + markdown_text).alias("title"), pl.lit(HOSTILE_TEXT).alias("summary")
        ),
        index,
        "community_reports",
    )
    return root


def test_hostile_text_renders_inert_in_the_report(hostile, tracker, tmp_path):
    import markdown  # python-markdown, as a reader's tool renders report.md

    report = api.write_index_report(hostile, tmp_path / "rep")
    text = (report if report.suffix == ".md" else report / "report.md").read_text(encoding="utf-8")
    rendered = markdown.markdown(text + "\n\n[t]: " + tracker + "/reference.png\n", extensions=["tables"])
    tags = Tags()
    tags.feed(rendered)
    assert "script" not in tags.seen and not tags.comments, tags.seen
    assert tags.handlers == [] and all(not src.startswith("http") for src in tags.images), tags.images
    assert not tags.links, tags.links  # no link at all: the report itself writes none
    assert "**bold**" in rendered and "`code`" in rendered  # the data's emphasis and code stay as typed
    assert "EVIL&lt;script&gt;" in rendered and "[click me](javascript:alert(4))" in rendered  # shown as text
    page = tmp_path / "rep" / "report.html"
    page.write_text(f"<!doctype html><meta charset=utf-8><body>{rendered}</body>", encoding="utf-8")
    Tracker.hits.clear()
    dom = headless_dom(page, tmp_path)  # opened as a person would: loaded, images fetched, scripts run
    assert Tracker.hits == [], Tracker.hits
    assert "EVIL&lt;script&gt;" in dom and not re.search(r"<body[^>]*data-pwned", dom)


def test_hostile_text_leaves_the_view_drawable(hostile, tmp_path):
    html = api.write_graph_view(hostile, tmp_path / "g.html").read_text(encoding="utf-8")
    page = References()
    page.feed(html)
    data = json.loads(next(text for kind, text in page.scripts if kind == "application/json"))
    assert HOSTILE_NAME in {e["title"] for e in data["entities"]}  # the data reaches the page whole
    dom = headless_dom(tmp_path / "g.html", tmp_path)
    assert 'id="status">loading…<' not in dom and "entities" in dom.split('id="status"', 1)[1][:300], dom[-2000:]
    assert not re.search(r"<body[^>]*data-pwned", dom), "a script from the data ran"


def headless_dom(page: Path, tmp_path: Path) -> str:
    """The page's DOM after headless Chromium loaded it (and ran what it runs)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:  # CI's set-up installs it: there, its absence is a failure, not a skip
        if os.environ.get("CI"):
            pytest.fail("headless Chromium is missing: scripts/setup.sh should have installed Debian's chromium")
        pytest.skip("headless Chromium is not installed (scripts/setup.sh installs it where apt-get works as root)")
    done = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.seen, self.comments, self.images, self.handlers, self.links = set(), [], [], [], []

    def handle_starttag(self, tag, attrs):
        self.seen.add(tag)
        self.handlers += [name for name, _ in attrs if name.startswith("on")]
        if tag == "img":
            self.images.append(dict(attrs).get("src", ""))
        if tag == "a":
            self.links.append(dict(attrs).get("href", ""))

    def handle_comment(self, data):
        self.comments.append(data)


def test_exports_with_control_bytes_are_well_formed_xml(hostile, tmp_path):
    import xml.etree.ElementTree as ET

    for fmt in ("graphml", "gexf"):
        (path,) = api.export_graph(hostile, fmt, tmp_path / fmt)
        ET.parse(path)  # well-formed: Gephi and every XML reader open it
        g = nx.read_graphml(path) if fmt == "graphml" else nx.read_gexf(path)
        described = [d for _, d in g.nodes(data=True) if "a page about" in (d.get("description") or "")]
        assert described and not CONTROL.search(described[0]["description"]), described[:1]
        assert described[0]["description"].endswith(" end")  # the text around them kept


def test_query_output_holds_no_terminal_control(hostile):
    """Every entity's description (the hostile fixture's) holds control sequences; the context printed shows them."""
    for extra in ([], ["--streaming"]):
        done = cli("query", "--method", "local", "--context-only", *extra, "EVIL script 李明", root=hostile)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "a page about" in done.stdout  # the hostile description was printed...
        assert not CONTROL.search(done.stdout + done.stderr), repr(CONTROL.findall(done.stdout + done.stderr))
