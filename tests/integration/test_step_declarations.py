"""What the pipeline knows about a step it learns from the step's declarations: a method with a step of its own
makes `update` refuse a change to that step's settings section, and `estimate` lists the step's own calls - with
nothing edited in the pipeline or the estimate."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from graphrag_ray import api
from graphrag_ray.errors import GraphRagRayError
from graphrag_ray.exec.step import BatchStep, StepContext, Tables
from graphrag_ray.index.pipeline import _REGISTERED_STEPS, INDEX_METHODS, register_method, register_step
from tests.helpers import make_root, write_input

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "english" / "input"


class NoteQuestions(BatchStep):
    """A step reading a section no built-in step reads (local_search), writing nothing."""

    name = "note_questions"
    settings_section = "local_search"

    def run(self, ctx: StepContext, tables: Tables) -> Tables:
        return {}


class AskTwice(BatchStep):
    """An LLM step of a plug-in: it estimates its own calls."""

    name = "ask_twice"
    uses_llm, settings_section = True, "extract_graph"

    def run(self, ctx: StepContext, tables: Tables) -> Tables:
        return {}

    def estimate(self, corpus) -> list:
        units = len(corpus.units)
        return [corpus.stage(self.name, "default_chat", 2 * units, 500 * units, 50 * units, True)]


@pytest.fixture
def methods():
    register_step(NoteQuestions)
    register_step(AskTwice)
    register_method("fast_noted", [*INDEX_METHODS["fast"][:-1], "note_questions", "finalize"])
    register_method("standard_asked", [*INDEX_METHODS["standard"][:-1], "ask_twice", "finalize"])
    yield
    for name in ("fast_noted", "standard_asked"):
        INDEX_METHODS.pop(name)
    for name in ("note_questions", "ask_twice"):
        _REGISTERED_STEPS.pop(name)


def project(tmp_path: Path, base_url: str) -> Path:
    root = make_root(tmp_path / "p", base_url, chunks={"size": 80, "overlap": 0})
    shutil.copytree(EXAMPLE, root / "input")
    return root


def change_setting(root: Path, section: str, key: str, value) -> None:
    settings = yaml.safe_load((root / "settings.yaml").read_text(encoding="utf-8"))
    settings.setdefault(section, {})[key] = value
    (root / "settings.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")


def test_update_refuses_a_change_to_a_section_a_step_of_the_method_declares(methods, tmp_path, simulator):
    noted, plain = project(tmp_path / "noted", simulator.base_url), project(tmp_path / "plain", simulator.base_url)
    api.build_index(root=noted, method="fast_noted")
    api.build_index(root=plain, method="fast")
    for root in (noted, plain):
        change_setting(root, "local_search", "top_k_entities", 3)
        write_input(root, "extra.txt", "Nora Quinn opened a bakery in Harbor Town.")
    with pytest.raises(GraphRagRayError, match="graph settings, models or prompts changed"):
        api.update_index(root=noted)
    assert api.update_index(root=plain).stats["kind"] == "update"  # no step of `fast` reads local_search


def test_estimate_lists_a_steps_own_calls(methods, tmp_path, simulator):
    root = project(tmp_path, simulator.base_url)
    plain, asked = api.estimate_index(root, method="standard"), api.estimate_index(root, method="standard_asked")
    extra = next(s for s in asked.stages if s.stage == "ask_twice")
    assert extra.calls == 2 * asked.text_units and extra.prompt_tokens == 500 * asked.text_units and extra.exact
    assert asked.total_calls == plain.total_calls + extra.calls
    assert [s.stage for s in asked.stages] == [s.stage for s in plain.stages] + ["ask_twice"]  # in the method's order
