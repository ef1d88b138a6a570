"""Indexes written by Microsoft GraphRAG 1.x and 2.x (tests/data/msgraphrag-1.2 and -2.7, built by their code
against our simulator: see their READMEs) answer every query method with `--data`, and `view` / `export` / `report`
read them; a 0.x layout is one line naming its version."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import polars as pl
import pytest

from tests.helpers import cli_in_process, make_root

DATA = Path(__file__).parents[1] / "data"
VERSIONS = ["1.2", "2.7"]


@pytest.fixture(params=VERSIONS)
def their_output(request, tmp_path) -> Path:
    folder = tmp_path / f"theirs-{request.param}"
    shutil.copytree(DATA / f"msgraphrag-{request.param}", folder)
    return folder / "output"


@pytest.mark.parametrize("method", ["local", "global", "drift", "basic"])
def test_every_method_answers_from_their_index(tmp_path, their_output, simulator, method):
    ours = make_root(tmp_path / "ours", simulator.base_url, workers={"executor": "local"})
    asked = cli_in_process("query", "--data", their_output, "--method", method, "李明的咖啡店在哪里？", root=ours)
    assert asked.returncode == 0, asked.stderr
    assert "李明" in asked.stdout or "咖啡" in asked.stdout, asked.stdout
    if method in ("local", "basic"):  # their records cited
        assert re.search(r"Sources \(([\d, ]+)", asked.stdout), asked.stdout
    context = cli_in_process(
        "query", "--data", their_output, "--method", method, "--context-only", "李明的咖啡店在哪里？", root=ours
    )
    assert context.returncode == 0 and "李明" in context.stdout, context.stderr


def test_view_export_and_report_read_their_index(tmp_path, their_output):
    entities = 16
    page = tmp_path / "view.html"
    viewed = cli_in_process("view", "--data", their_output, "--out", page, "--root", tmp_path)
    assert viewed.returncode == 0, viewed.stderr
    assert "李明" in page.read_text(encoding="utf-8")
    exported = cli_in_process(
        "export", "--data", their_output, "--format", "graphml", "--out", tmp_path / "graph", "--root", tmp_path
    )
    assert exported.returncode == 0, exported.stderr
    graphml = (tmp_path / "graph" / "graph.graphml").read_text(encoding="utf-8")
    assert graphml.count("<node ") == entities
    reported = cli_in_process("report", "--data", their_output, "--out", tmp_path / "report", "--root", tmp_path)
    assert reported.returncode == 0, reported.stderr
    text = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert "李明" in text and "Microsoft GraphRAG" in text
    assert "every item of every step succeeded" not in text and "LLM calls" not in text  # what they do not record


def test_a_0x_layout_is_one_line_naming_its_version(tmp_path, simulator):
    old = tmp_path / "old" / "output"
    old.mkdir(parents=True)
    pl.DataFrame({"id": ["e1"], "name": ["李明"], "type": ["PERSON"], "description": ["店主"]}).write_parquet(
        old / "create_final_entities.parquet"
    )
    ours = make_root(tmp_path / "ours", simulator.base_url)
    asked = cli_in_process("query", "--data", old, "--method", "local", "李明是谁？", root=ours)
    assert asked.returncode != 0
    assert asked.stderr.count("\n") == 1 and "Microsoft GraphRAG 0.x" in asked.stderr, asked.stderr


def test_init_from_a_1x_settings_file_then_query_their_1x_index(tmp_path, simulator):
    """1.x's `llm:` / `embeddings.llm:` file (what its `graphrag init` wrote) is translated as a 2.x one is."""
    theirs = tmp_path / "theirs"
    shutil.copytree(DATA / "msgraphrag-1.2", theirs)
    (theirs / ".env").write_text(
        f"GRAPHRAG_API_KEY=sk-test-0123456789abcdef\nGRAPHRAG_API_BASE={simulator.base_url}\n", encoding="utf-8"
    )
    ours = tmp_path / "ours"
    done = cli_in_process("init", "--root", ours, "--from-msgraphrag", theirs / "settings.yaml")
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert f"their index in {theirs / 'output'} is read as it is" in said
    from graphrag_ray.config.load import load_settings

    settings = load_settings(ours)
    chat, embedding = settings.models["default_chat"], settings.models["default_embedding"]
    assert (chat.model, chat.encoding, chat.api_base) == ("gpt-4o-mini", "o200k_base", simulator.base_url)
    assert (embedding.type, embedding.model) == ("embedding", "text-embedding-3-small")
    assert settings.chunks.encoding == "o200k_base" and settings.input.text_column == "text"
    assert (chat.price.input_per_1m, chat.price.cached_input_per_1m) == (0.15, 0.075)  # the list price, written
    asked = cli_in_process("query", "--root", ours, "--data", theirs / "output", "-m", "local", "李明的咖啡店在哪里？")
    assert asked.returncode == 0 and "李明" in asked.stdout, asked.stderr
