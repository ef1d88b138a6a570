"""What a user budgets with: `estimate`, `index --rehearse` and the real run agree on calls and prompt tokens."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from graphrag_ray import api
from graphrag_ray.rehearse import rehearse
from graphrag_ray.simulate.process import SimulatorProcess
from tests.helpers import make_root

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("corpus", ["english", "coffee_shop"])
def test_estimate_rehearsal_and_the_run_agree_within_15_percent(tmp_path, corpus):
    with SimulatorProcess() as sim:
        root = make_root(tmp_path / corpus, sim.base_url, workers={"executor": "local"})
        shutil.copytree(EXAMPLES / corpus / "input", root / "input")
        estimate = api.estimate_index(root)
        rehearsal = rehearse(root, latency=0.0).result.ledger.total()
        run = api.build_index(root=root).ledger
        real = run.total()
    projected = sum(stage.prompt_tokens for stage in estimate.stages)
    print(
        f"{corpus}: calls estimate {estimate.total_calls}, rehearsal {rehearsal.calls}, run {real.calls}; "
        f"prompt tokens {projected}, {rehearsal.prompt_tokens}, {real.prompt_tokens}"
    )
    for calls, prompt in ((estimate.total_calls, projected), (rehearsal.calls, rehearsal.prompt_tokens)):
        assert abs(calls - real.calls) <= 0.15 * real.calls
        assert abs(prompt - real.prompt_tokens) <= 0.15 * real.prompt_tokens
    extraction = next(stage for stage in estimate.stages if stage.stage == "extract_graph")
    assert (
        extraction.exact
        and abs(extraction.prompt_tokens - run.total("extract_graph").prompt_tokens) <= 0.05 * extraction.prompt_tokens
    )


def test_the_fast_method_is_estimated_as_calling_no_chat_model(tmp_path):
    root = make_root(tmp_path / "fast", "http://127.0.0.1:9/v1", workers={"executor": "local"})
    shutil.copytree(EXAMPLES / "english" / "input", root / "input")
    fast = api.estimate_index(root, method="fast")
    assert [stage.stage for stage in fast.stages] == ["embed"]
    # no price in the settings: text-embedding-3-small's list price (USD 0.02 per 1M tokens)
    assert fast.total_cost == pytest.approx(fast.stages[0].prompt_tokens * 0.02 / 1e6) and not fast.unpriced
    standard = api.estimate_index(root)
    assert {"extract_graph", "summarize_descriptions", "community_reports"} <= {s.stage for s in standard.stages}
    with pytest.raises(Exception, match="--method nope: unknown method"):
        api.estimate_index(root, method="nope")
