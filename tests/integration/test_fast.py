"""The offline `fast` method (no LLM at index time) and no-LLM answers, on Chinese and English corpora."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from asyncio import run as run_closing  # the API closes the HTTP sessions it opened
from pathlib import Path

import polars as pl
import pytest

from graphrag_ray import api
from graphrag_ray.storage.tables import read_table

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example_root(tmp: Path, name: str) -> Path:
    root = tmp / name
    shutil.copytree(EXAMPLES / name, root, ignore=shutil.ignore_patterns("output", "cache", "runs"))
    return root


@pytest.fixture(scope="module")
def coffee(tmp_path_factory, ray_session, no_key):
    root = example_root(tmp_path_factory.mktemp("fast"), "coffee_shop")
    return root, api.build_index(root=root, method="fast")


@pytest.fixture(scope="module")
def english(tmp_path_factory, ray_session, no_key):
    root = example_root(tmp_path_factory.mktemp("fast"), "english")
    return root, api.build_index(root=root, method="fast")


def top_titles(output: Path, n: int) -> list[str]:
    ents = read_table(output, "entities")
    return ents.sort(["frequency", "degree", "title"], descending=[True, True, False])["title"].head(n).to_list()


def test_fast_index_of_chinese_corpus_needs_no_llm(coffee):
    root, result = coffee
    assert result.ledger.total().calls == 0 and result.ledger.total().cache_hits == 0
    top = top_titles(result.index, 8)
    assert top[0] == "李明" and {"王芳", "杭州", "张伟"} <= set(read_table(result.index, "entities")["title"])
    types = dict(read_table(result.index, "entities").select("title", "type").iter_rows())
    assert types["李明"] == "PERSON" and types["王芳"] == "PERSON" and types["杭州"] == "GEO"
    communities = read_table(result.index, "communities")
    reports = read_table(result.index, "community_reports")
    assert communities.height >= 2 and reports.height == communities.height
    assert all(r.startswith("# ") and "[Data: " in r for r in reports["full_content"].to_list())
    assert reports["rank"].min() > 0


def test_no_llm_local_answer_cites_the_right_source(coffee):
    root, result = coffee
    units = read_table(result.index, "text_units")
    supplier_unit = units.filter(pl.col("text").str.contains("张伟"))["human_readable_id"].item()
    answer = run_closing(api.search("李明的咖啡豆供应商张伟在哪里？", "local", root)).response
    assert answer.startswith("[Extractive answer")
    assert "张伟" in answer and f"Sources ({supplier_unit}" in answer


@pytest.mark.parametrize("method", ["global", "drift", "basic", "hybrid", "auto"])
def test_every_method_answers_without_an_llm(coffee, method):
    root, _ = coffee
    result = run_closing(api.search("李明如何降低获客成本？", method, root))
    assert result.response.startswith("[Extractive answer") and "[Data: " in result.response
    assert result.details.get("paid_calls", 0) == 0 and result.cost == 0


def test_fast_index_of_english_corpus(english):
    root, result = english
    titles = set(read_table(result.index, "entities")["title"])
    assert {"MARIA LOPEZ", "TOM BECKER", "HARBOR BREAD", "PORTSMOUTH"} <= titles
    assert top_titles(result.index, 3)[0] in {"MARIA LOPEZ", "HARBOR BREAD", "PORTSMOUTH"}
    answer = run_closing(api.search("Where did Tom Becker train?", "local", root)).response
    assert "Paris Culinary Institute" in answer and "Sources (" in answer


@pytest.mark.parametrize("example", ["coffee_shop", "english"])
def test_readme_quickstart_runs_end_to_end(tmp_path, no_key, example):
    """Each example asks its own questions, in its language; the output holds no DEBUG line, no table of zeros and
    no sentence the data does not hold; offline global search answers a themes question from the communities."""
    root = example_root(tmp_path, example)
    env = {k: v for k, v in os.environ.items() if k != "GRAPHRAG_API_KEY"}
    env["GR"] = str(Path(sys.executable).parent / "graphrag-ray")
    out = subprocess.run(
        ["bash", str(EXAMPLES / "quickstart.sh"), str(root)], capture_output=True, text=True, timeout=300, env=env
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "index published to" in out.stdout and "no LLM calls" in out.stdout
    both = out.stdout + out.stderr
    assert "DEBUG" not in both and "LLM usage" not in both and "Traceback" not in both
    assert out.stdout.count("[Extractive answer") == 2
    assert "appear in the same passage" not in out.stdout  # no made-up relationship description is quoted
    if example == "coffee_shop":
        assert "李明" in out.stdout
    else:
        assert "What are the main themes?" in out.stdout and "Nothing in the indexed data matches" not in out.stdout
        corpus = " ".join(p.read_text(encoding="utf-8") for p in (root / "input").iterdir())
        lines = out.stdout.splitlines()
        answers = [lines[i + 1] for i, line in enumerate(lines[:-1]) if line.startswith("[Extractive answer")]
        assert len(answers) == 2
        for line in answers:  # every quoted sentence is one of the documents'
            for sentence in re.split(r"(?<=[.!?])\s+", re.sub(r"\s*\[Data:.*?\]", "", line)):
                assert not sentence.strip() or sentence.strip() in corpus, sentence


def technical_corpus(folder: Path) -> None:
    """Chinese manual pages: markup leftovers and a translation note on every page, the same generic words
    everywhere, and each page about its own tool (said several times) and its maintainer."""
    tools = [
        ("防火墙", "张伟"),
        ("内核模块", "李娜"),
        ("打印机", "王强"),
        ("调度器", "刘洋"),
        ("编译器", "陈静"),
        ("数据库", "杨帆"),
        ("浏览器", "赵磊"),
        ("播放器", "黄敏"),
        ("压缩包", "周杰"),
        ("证书", "吴刚"),
        ("交换机", "徐丽"),
        ("路由器", "孙涛"),
    ]
    folder.mkdir(parents=True, exist_ok=True)
    for i, (tool, person) in enumerate(tools):
        text = (
            f"MAIN CONTENT STARTS HERE\nDOCBOOK XSL STYLESHEETS\n"
            f"本手册页面由志愿者翻译。本手册页面仅供参考。\n"
            f"这个命令用于管理{tool}。用户可以通过选项指定文件，命令会读取文件并输出信息。"
            f"{tool}的配置由维护者{person}负责。{person}在文档中说明了{tool}的用法，"
            f"{tool}需要系统参数。{tool}的日志写入文件，用户查看信息。\n"
        )
        (folder / f"man{i:02d}.txt").write_text(text, encoding="utf-8")


def test_fast_graph_of_technical_text_keeps_distinctive_terms(tmp_path, ray_session, no_key):
    root = example_root(tmp_path, "coffee_shop")
    shutil.rmtree(root / "input")
    technical_corpus(root / "input")
    result = api.build_index(root=root, method="fast")
    ents = read_table(result.index, "entities")
    top = ents.sort(["degree", "title"], descending=[True, False])["title"].head(12).to_list()
    generic = {"选项", "文件", "命令", "用户", "信息", "系统", "手册", "页面", "志愿者", "参数"}
    assert not generic & set(top), top
    assert {"防火墙", "内核模块", "打印机"} <= set(ents["title"].to_list()), "each page's own subject is kept"
    titles = ents["title"].to_list()
    assert not [t for t in titles if "MAIN CONTENT" in t or "DOCBOOK" in t or "STYLESHEET" in t], titles
    persons = ents.filter(pl.col("type") == "PERSON")["title"].to_list()
    assert not [p for p in persons if p.isascii() and p.isupper()], "no markup string typed PERSON"
    assert result.stats["steps"]["nlp_graph"]["events"].get("generic_concepts_dropped", 0) >= 1


def test_the_first_line_of_index_names_the_ray_cluster_it_started_or_joined(tmp_path, ray_session, no_key):
    """A plain `index` starts a Ray cluster of its own (even beside one `ray start` recorded on the machine: on a
    shared machine that was another user's) and says so; one given RAY_ADDRESS joins that cluster and says so -
    its address, live nodes and CPUs - before anything else."""
    import re

    import yaml

    root = example_root(tmp_path, "coffee_shop")
    settings = yaml.safe_load((root / "settings.yaml").read_text())
    settings["workers"]["executor"] = "ray"
    (root / "settings.yaml").write_text(yaml.safe_dump(settings))
    command = [str(Path(sys.executable).parent / "graphrag-ray"), "index", "--root", str(root), "--method", "fast"]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    started = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert started.returncode == 0, started.stderr
    assert re.fullmatch(
        r"Ray: started a local cluster at [\d.]+:\d+ \(1 node, \d+ CPUs\)", started.stdout.splitlines()[0]
    ), started.stdout
    address = ray_session.get_runtime_context().gcs_address
    joined = subprocess.run(
        [*command, "--force"], capture_output=True, text=True, timeout=300, env={**env, "RAY_ADDRESS": address}
    )
    assert joined.returncode == 0, joined.stderr
    assert joined.stdout.splitlines()[0] == f"Ray: joined the cluster at {address} (1 node, 2 CPUs)", joined.stdout
    assert "index published" in joined.stdout
