"""The name rules that propose entity-resolution candidates (the LLM decides; these only decide what it is asked),
and how a confirmation answer is read."""

from __future__ import annotations

import asyncio
import json

from graphrag_ray.config.settings import Settings
from graphrag_ray.exec.step import StepContext
from graphrag_ray.index.steps.resolve_entities import STEP
from graphrag_ray.nlp.aliases import name_form, rule_fits, rule_pairs


def pairs(*names: str) -> dict[tuple[str, str], str]:
    return {(a, b): rule for a, b, rule in rule_pairs([name_form(n, n) for n in names])}


def test_titles_surnames_initials_and_width_are_candidates():
    found = pairs(
        "SHERLOCK HOLMES",
        "HOLMES",
        "MR. HOLMES",
        "S. HOLMES",
        "IBM",
        "ＩＢＭ",
        "J. R. R. TOLKIEN",
        "JOHN RONALD REUEL TOLKIEN",
    )
    assert found[("HOLMES", "SHERLOCK HOLMES")] == "first or last name alone"
    assert found[("MR. HOLMES", "HOLMES")] == "same name without its title"
    assert found[("S. HOLMES", "SHERLOCK HOLMES")] == "initials"
    assert found[("J. R. R. TOLKIEN", "JOHN RONALD REUEL TOLKIEN")] == "initials"
    assert found[("IBM", "ＩＢＭ")] == "same name"


def test_chinese_titles_point_to_full_names_with_that_surname():
    found = pairs("李明", "李老板", "李华", "王芳", "老王", "张总", "张伟")
    assert found[("李老板", "李明")] == found[("李老板", "李华")] == "surname with a title"
    assert ("老王", "王芳") in found and ("张总", "张伟") in found
    assert ("李明", "李华") not in found and ("李华", "李明") not in found


def test_two_full_names_never_pair_and_weak_clues_are_not_asked():
    found = pairs("JOHN WATSON", "MARY WATSON", "AL", "ALBERT EINSTEIN", "LONDON", "NEW LONDON")
    assert not any({a, b} == {"JOHN WATSON", "MARY WATSON"} for a, b in found)
    assert ("AL", "ALBERT EINSTEIN") not in found  # a two-letter short form is too weak a clue
    assert ("LONDON", "NEW LONDON") in found  # a candidate; the model decides (a place named after another)


def test_an_ambiguous_short_name_is_not_asked_about_at_all():
    many = [f"{first} SMITH" for first in ("ANNA", "BEN", "CARL", "DORA", "EVA")]
    assert len(pairs("SMITH", *many)) == 5
    assert not rule_pairs([name_form(n, n) for n in ("SMITH", *many)], max_per_name=4)


def test_identifiers_are_not_names_and_person_rules_need_people():
    assert not pairs("DWARF", "ADD DWARF-5", "R_SECTION", "ADD R_SECTION", "A-1", "ABOUT-VARIABLES-1")
    assert not name_form("MS-DOS", "MS-DOS").titled and name_form("DR WATSON", "DR WATSON").titled
    assert rule_fits("first or last name alone", {"PERSON"}) and rule_fits("surname with a title", {"人物"})
    assert not rule_fits("first or last name alone", {"EVENT"}) and not rule_fits("initials", {"GEO"})
    assert rule_fits("part of the name", {"GEO"}) and rule_fits("same name", {"EVENT"})


class _Answer:
    def __init__(self, content: str):
        self.content = content


class _Models:
    """A chat model that answers with a fixed text (the step's own validation is the model layer's job)."""

    def __init__(self, content: str):
        self.content = content

    def chat(self, model_id):
        outer = self

        class Chat:
            async def chat(self, messages, **kwargs):
                return _Answer(outer.content)

        return Chat()


def test_a_confirmation_merges_only_what_its_pairs_support_and_skips_malformed_entries(tmp_path):
    item = {
        "item_id": "g1",
        "pairs": [["holmes", "sherlock", "first or last name alone"]],
        "entities": [
            {"key": k, "title": t, "type": "PERSON", "mentions": m, "description": ""}
            for k, t, m in (("holmes", "HOLMES", 3), ("sherlock", "SHERLOCK HOLMES", 1), ("watson", "JOHN WATSON", 2))
        ],
    }
    answer = {
        "merges": [
            "junk",
            {"names": "HOLMES"},
            {"names": ["HOLMES", "SHERLOCK HOLMES"], "reason": "same"},
            {"names": ["JOHN WATSON", "SHERLOCK HOLMES"], "reason": "no asked pair links them"},
        ]
    }
    ctx = StepContext(Settings.model_validate({"resolve_entities": {"enabled": True}}), tmp_path)
    rows = asyncio.run(STEP.process(ctx, item, _Models(json.dumps(answer))))
    # the kept name is the full one, though the short one has more mentions; WATSON's unsupported merge is dropped
    assert [(r["canonical"], r["merged"]) for r in rows["merges"]] == [("sherlock", "holmes")]
