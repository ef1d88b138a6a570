"""Coming from Microsoft GraphRAG: `init --from-msgraphrag` on a project `graphrag init` (3.3.0) wrote, and
`query` / `view` / `export` / `report` with `--data` on an index `graphrag index` (3.3.0) wrote
(tests/data/msgraphrag-3.3, built against our simulator by their code: see its README)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from graphrag_ray.config.load import load_settings
from tests.helpers import TEST_KEY, cli_in_process

THEIRS = Path(__file__).parents[1] / "data" / "msgraphrag-3.3"


@pytest.fixture()
def their_project(tmp_path, simulator):
    project = tmp_path / "theirs"
    shutil.copytree(THEIRS, project)
    (project / ".env").write_text(
        f"GRAPHRAG_API_KEY={TEST_KEY}\nGRAPHRAG_API_BASE={simulator.base_url}\n", encoding="utf-8"
    )
    return project


def test_init_from_their_settings_then_check_and_index(tmp_path, their_project, simulator, ray_session):
    ours = tmp_path / "ours"
    done = cli_in_process("init", "--root", ours, "--from-msgraphrag", their_project / "settings.yaml")
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    for no_counterpart in (
        "vector_store: no counterpart",
        "drift_search.prompt: no counterpart",
        "extract_graph_nlp: no counterpart",
    ):
        assert no_counterpart in said
    assert "prompts/extract_graph.txt: copied from" in said

    settings = load_settings(ours)  # their .env came along: ${GRAPHRAG_API_BASE} and the key resolve
    chat, embedding = settings.models["default_chat"], settings.models["default_embedding"]
    assert (chat.type, chat.model, chat.api_base) == ("chat", "gpt-4o-mini", simulator.base_url)
    assert (embedding.type, embedding.model) == ("embedding", "text-embedding-3-small")
    assert chat.api_key.get_secret_value() == TEST_KEY
    assert TEST_KEY not in (ours / "settings.yaml").read_text(encoding="utf-8"), "the key stays in .env"
    assert "${GRAPHRAG_API_KEY}" in (ours / "settings.yaml").read_text(encoding="utf-8")
    assert (settings.chunks.size, settings.chunks.overlap, settings.chunks.encoding) == (1200, 100, "o200k_base")
    assert settings.extract_graph.entity_types == ["organization", "person", "geo", "event"]
    assert (settings.input.file_type, settings.input.text_column) == ("csv", "text")
    assert (ours / settings.input.base_dir).resolve() == (their_project / "input").resolve()
    assert (ours / "prompts" / "extract_graph.txt").read_text(encoding="utf-8") == (
        their_project / "prompts" / "extract_graph.txt"
    ).read_text(encoding="utf-8")
    assert (ours / "prompts" / "community_report.txt").read_text(encoding="utf-8") == (
        their_project / "prompts" / "community_report_graph.txt"
    ).read_text(encoding="utf-8")

    checked = cli_in_process("check", "--root", ours)
    assert checked.returncode == 0 and checked.stdout.count("ok: ") == 2, checked.stdout + checked.stderr
    built = cli_in_process("index", "--root", ours)
    assert built.returncode == 0, built.stderr
    assert "failures 0" in built.stdout
    asked = cli_in_process("query", "--root", ours, "--method", "global", "李明的咖啡店在哪里？")
    assert asked.returncode == 0 and asked.stdout.strip(), asked.stderr  # their map/reduce prompts, filled


@pytest.mark.parametrize("method", ["local", "global", "drift", "basic"])
def test_query_their_index(tmp_path, their_project, simulator, ray_session, method):
    ours = tmp_path / "ours"
    assert cli_in_process("init", "--root", ours, "--from-msgraphrag", their_project / "settings.yaml").returncode == 0
    asked = cli_in_process(
        "query", "--root", ours, "--data", their_project / "output", "--method", method, "李明的咖啡店在哪里？"
    )
    assert asked.returncode == 0, asked.stderr
    assert "李明" in asked.stdout or "咖啡" in asked.stdout, asked.stdout
    assert f"[{method}]" in asked.stderr + asked.stdout
    if method in ("local", "basic"):  # their ids cited: the records are theirs
        cited = re.search(r"Sources \(([\d, ]+)", asked.stdout)
        assert cited, asked.stdout


def test_view_export_and_report_their_index(tmp_path, their_project):
    data = their_project / "output"
    page = tmp_path / "view.html"
    viewed = cli_in_process("view", "--data", data, "--out", page, "--root", tmp_path)
    assert viewed.returncode == 0, viewed.stderr
    assert "李明" in page.read_text(encoding="utf-8") and "张伟" in page.read_text(encoding="utf-8")
    exported = cli_in_process(
        "export", "--data", data, "--format", "graphml", "--out", tmp_path / "graph", "--root", tmp_path
    )
    assert exported.returncode == 0, exported.stderr
    graphml = (tmp_path / "graph" / "graph.graphml").read_text(encoding="utf-8")
    assert graphml.count("<node ") == 15 and graphml.count("<edge ") == 20  # their 15 entities, 20 relationships
    reported = cli_in_process("report", "--data", data, "--out", tmp_path / "report", "--root", tmp_path)
    assert reported.returncode == 0, reported.stderr
    text = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert "李明" in text and "15" in text
