"""Bulk evaluation on the coffee-shop index against the simulator."""

from __future__ import annotations

import json

import polars as pl
import pytest

from graphrag_ray import api
from graphrag_ray.eval.run import run_eval
from tests.integration.test_index import coffee_root


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory, simulator, ray_session):
    root = coffee_root(tmp_path_factory.mktemp("eval"), simulator.base_url)
    api.build_index(root=root)
    out = root / "eval" / "run1"
    return root, out, run_eval(root, generate=6, methods=["local", "global", "evidence"], out=out)


def test_eval_writes_tables_report_and_charts(evaluated):
    root, out, result = evaluated
    for name in ("questions", "answers", "judgments", "win_rates", "gold_metrics"):
        assert (out / f"{name}.parquet").exists(), name
    answers = pl.read_parquet(out / "answers.parquet")
    assert answers.height == 6 * 3 and answers["error"].null_count() == answers.height
    assert (answers["answer"].str.len_chars() > 0).all()
    # the evidence method calls no chat model: its cost is the question's embedding (text-embedding-3-small's list
    # price, USD 0.02 per 1M tokens: a few millionths of a dollar)
    assert answers.filter(pl.col("method") == "evidence")["cost"].max() < 1e-5
    assert answers.filter(pl.col("method") != "evidence")["llm_calls"].min() >= 1
    rates = pl.read_parquet(out / "win_rates.parquet")
    assert rates.height == 3 * 4  # three method pairs x four criteria
    assert ((rates["ci_low"] <= rates["win_rate"]) & (rates["win_rate"] <= rates["ci_high"])).all()
    report = (out / "report.md").read_text()
    assert "## Pairwise win rates" in report and "comprehensiveness" in report
    for png in ("win_rates.png", "cost_latency.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    local_recall = pl.read_parquet(out / "gold_metrics.parquet").filter(
        (pl.col("method") == "local") & pl.col("evidence_recall").is_not_null()
    )["evidence_recall"]
    assert local_recall.len() > 0 and local_recall.mean() > 0
    # global search's context is reports, not passages: its evidence recall is n/a, never a misleading 0
    gold = pl.read_parquet(out / "gold_metrics.parquet")
    assert (
        gold.filter(pl.col("method") == "global")["evidence_recall"].null_count()
        == gold.filter(pl.col("method") == "global").height
    )
    assert "n/a" in report


def test_rerun_skips_answered_pairs(evaluated, simulator):
    root, out, first = evaluated
    before = simulator.stats().get("ok", 0)
    again = run_eval(root, generate=6, methods=["local", "global", "evidence"], out=out)
    assert simulator.stats().get("ok", 0) == before, "no question is answered or judged twice"
    assert again.answers.height == first.answers.height


def test_questions_file_with_gold_answers(evaluated, tmp_path):
    root, _, _ = evaluated
    qfile = tmp_path / "q.jsonl"
    qfile.write_text(
        "\n".join(
            json.dumps(q, ensure_ascii=False)
            for q in [
                {"id": "q1", "question": "咖啡豆的供应商是谁？", "gold_answer": "张伟", "gold_evidence": ["3"]},
                {"id": "q2", "question": "拿铁定价多少？", "gold_answer": "二十八元"},
            ]
        )
    )
    result = run_eval(root, questions_file=qfile, methods=["evidence"], judge=False, out=tmp_path / "gold")
    gold = result.gold.sort("question_id")
    assert gold["question_id"].to_list() == ["q1", "q2"]
    assert gold["exact_match"].to_list() == [True, True]
    assert gold.filter(pl.col("question_id") == "q1")["evidence_recall"].item() == 1.0
