"""An update's summary revisions share calls: one JSON answer for a group, an item it leaves out revised alone,
a failed shared call leaving every item of it joined and recorded."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

from graphrag_ray.config.settings import Settings
from graphrag_ray.errors import LLMUnavailableError
from graphrag_ray.exec.step import StepContext
from graphrag_ray.index.steps.summarize_descriptions import STEP
from graphrag_ray.simulate.responders import summarize_update, summarize_update_batch


class Chat:
    """Answers as the simulator does, except where told: `leave_out` item numbers missing from a shared answer,
    or every shared call failing."""

    def __init__(self, leave_out=(), shared_fails=False, max_tokens=4000):
        self.leave_out, self.shared_fails = {str(n) for n in leave_out}, shared_fails
        self.calls: list[str] = []
        self.tokenizer = SimpleNamespace(count=lambda text: len(text) // 4, count_repeated=lambda text: len(text) // 4)
        self.config = SimpleNamespace(max_tokens=max_tokens)

    async def chat(self, messages, stage, json_mode=False, validate=None):
        prompt = messages[-1]["content"]
        shared = "Items to Revise:" in prompt
        self.calls.append("shared" if shared else "alone")
        if shared and self.shared_fails:
            raise LLMUnavailableError("gpt-4o-mini: HTTP 503 after 3 tries")
        if not shared:
            return SimpleNamespace(content=summarize_update(prompt))
        answer = {k: v for k, v in json.loads(summarize_update_batch(prompt)).items() if k not in self.leave_out}
        content = json.dumps(answer)
        assert validate is None or validate(content)
        return SimpleNamespace(content=content)


def revision_item(n: int) -> dict:
    old = [f"Hub {n} runs site {k}." for k in range(3)]
    return {
        "item_id": f"e{n}",
        "names": f"HUB {n}",
        "descriptions": [*old[1:], f"Hub {n} opened site 9."],
        "revision": {
            "summary": f"HUB {n}: " + " ".join(old),
            "added": [f"Hub {n} opened site 9."],
            "removed": [old[0]],
        },
    }


def run(items: list[dict], chat: Chat, per_call: int = 8):
    settings = Settings.model_validate({"summarize_descriptions": {"revisions_per_call": per_call}})
    ctx = StepContext(settings=settings, root=Path("."))
    models = SimpleNamespace(chat=lambda model_id: chat)
    return asyncio.run(STEP.process_batch(ctx, items, models))


def summaries(rows) -> list[str]:
    return [r["summaries"][0]["description"] for r in rows]


def test_revisions_of_a_partition_share_one_call_and_each_item_gets_its_own_answer():
    items = [revision_item(n) for n in range(5)]
    chat = Chat()
    rows = run(items, chat)
    assert chat.calls == ["shared"]
    for n, text in enumerate(summaries(rows)):
        assert text.startswith(f"HUB {n}: ") and "opened site 9" in text and "runs site 0" not in text, text
        assert "runs site 1" in text and f"Hub {(n + 1) % 5}" not in text
    assert [r["summaries"][0]["id"] for r in rows] == [f"e{n}" for n in range(5)], "one Rows per item, in order"


def test_groups_hold_at_most_revisions_per_call_and_one_left_alone_goes_alone():
    chat = Chat()
    run([revision_item(n) for n in range(5)], chat, per_call=2)
    assert sorted(chat.calls) == ["alone", "shared", "shared"], chat.calls
    chat = Chat()
    run([revision_item(n) for n in range(5)], chat, per_call=1)
    assert chat.calls == ["alone"] * 5


def test_an_item_the_shared_answer_leaves_out_is_revised_alone():
    chat = Chat(leave_out=[2])
    rows = run([revision_item(n) for n in range(1, 4)], chat)
    assert chat.calls == ["shared", "alone"]
    assert summaries(rows)[1].startswith("HUB 2: ") and "opened site 9" in summaries(rows)[1]


def test_a_failed_shared_call_keeps_each_item_s_descriptions_joined_and_records_it():
    items = [revision_item(n) for n in range(3)]
    rows = run(items, Chat(shared_fails=True))
    for item, got in zip(items, rows):
        assert got["summaries"][0]["description"] == "\n".join(item["descriptions"])
        assert [f["item_id"] for f in got["failures"]] == [item["item_id"]] and "503" in got["failures"][0]["reason"]


def test_items_without_a_revision_are_summarised_alone_beside_the_shared_call():
    fresh = {"item_id": "x", "names": "ALONE", "descriptions": ["Alone is one.", "Alone is two."]}
    chat = Chat()

    async def plain(messages, stage, json_mode=False, validate=None):
        chat.calls.append("fresh")
        return SimpleNamespace(content="ALONE: one and two.")

    shared = chat.chat
    chat.chat = lambda messages, stage, **kw: (shared if "Items to Revise:" in messages[-1]["content"] else plain)(
        messages, stage, **kw
    )
    rows = run([revision_item(0), fresh, revision_item(1)], chat)
    assert sorted(chat.calls) == ["fresh", "shared"] and summaries(rows)[1] == "ALONE: one and two."


def new_item(n: int) -> dict:
    return {
        "item_id": f"n{n}",
        "names": f"NEW {n}",
        "descriptions": [f"New {n} is small.", f"New {n} is near."],
        "revision": {"summary": "", "added": [f"New {n} is near.", f"New {n} is small."], "removed": []},
    }


def test_an_item_with_no_current_description_is_written_in_the_shared_call_from_its_descriptions():
    chat = Chat()
    rows = run([revision_item(0), new_item(1), new_item(2)], chat)
    assert chat.calls == ["shared"]
    assert summaries(rows)[1] == "NEW 1: New 1 is near. New 1 is small.", summaries(rows)


def test_one_left_out_of_the_shared_answer_or_alone_in_its_group_is_written_as_a_build_writes_it():
    chat = Chat(leave_out=[2])
    prompts = []
    shared = chat.chat

    async def recording(messages, stage, **kw):
        prompts.append(messages[-1]["content"])
        return await shared(messages, stage, **kw)

    chat.chat = recording
    rows = run([revision_item(0), new_item(1)], chat)
    assert chat.calls == ["shared", "alone"]
    assert "Description List:" in prompts[1] and "Current Description" not in prompts[1], "the build's prompt"
    assert summaries(rows)[1].startswith("NEW 1")
    chat = Chat()
    run([new_item(1)], chat)
    assert chat.calls == ["alone"]


def test_a_group_is_cut_where_its_answer_would_pass_the_model_s_max_tokens():
    chat = Chat(max_tokens=100)  # about two of these answers fit in 80 % of it
    rows = run([revision_item(n) for n in range(5)], chat)
    assert sorted(chat.calls) == ["alone", "shared", "shared"], chat.calls
    assert [s.split(":")[0] for s in summaries(rows)] == [f"HUB {n}" for n in range(5)]


def test_a_hub_that_only_gained_keeps_its_summary_unless_it_failed_or_lost_one(tmp_path):
    """add_revisions: a summary whose item gained one description of twenty is kept, with the sources it was
    written from; one that lost a description is revised; one whose previous call failed (its item not among the
    done keys: the descriptions joined stood for it) is written again, never kept."""
    import polars as pl

    from graphrag_ray.exec.carried import KEY_COLUMN
    from graphrag_ray.index.operations.descriptions import add_revisions, description_digest
    from graphrag_ray.storage.location import Store
    from graphrag_ray.storage.tables import write_table

    old = [f"Hub runs site {k}." for k in range(20)]
    folder = tmp_path / "carried" / "summarize_descriptions"
    rows = [
        {"id": name, "description": f"{name}: summary", "sources": [description_digest(d) for d in old]}
        for name in ("gained", "lost", "failed")
    ]
    summaries = pl.DataFrame(rows).with_columns(pl.Series(KEY_COLUMN, ["k-gained", "k-lost", "k-failed"]))
    write_table(summaries, folder, "summaries", typed=False)
    write_table(pl.DataFrame({"key": ["k-gained", "k-lost"]}), folder, "items", typed=False)
    settings = Settings.model_validate({})
    ctx = StepContext(settings=settings, root=Path("."), previous=Store(tmp_path))
    items = [
        {"item_id": "gained", "names": "HUB", "descriptions": [*old, "Hub opened site 99."]},
        {"item_id": "lost", "names": "HUB", "descriptions": old[1:]},
        {"item_id": "failed", "names": "HUB", "descriptions": [*old, "Hub opened site 99."]},
    ]
    add_revisions(ctx, items, pl.DataFrame({"id": ["u1"]}), shared_call_saving=100)
    gained, lost, failed = items
    assert gained["keep"] == {
        "summary": "gained: summary",
        "sources": sorted(rows[0]["sources"]),
        "unsaid": [description_digest("Hub opened site 99.")],
    }
    assert "revision" not in gained
    assert "keep" not in lost and "keep" not in failed
    rows_out = run([gained], Chat())
    assert rows_out[0]["summaries"][0]["description"] == "gained: summary"
    assert rows_out[0]["summaries"][0]["sources"] == sorted(rows[0]["sources"])


def test_a_few_short_descriptions_are_joined_with_no_call_and_many_or_long_ones_are_summarised():
    """LightRAG's rule: the model summarises an item from `summarize_from` distinct descriptions, or when they pass
    max_length words together; the others keep their descriptions joined (with_summaries) at no cost."""
    import polars as pl

    from graphrag_ray.index.operations.descriptions import with_summaries

    def descriptions(n: int, words: int = 6) -> list[str]:
        return [f"Item {k} " + "word " * words for k in range(n)]

    entities = pl.DataFrame(
        {
            "id": ["two", "three", "four", "long_pair", "one"],
            "title": ["TWO", "THREE", "FOUR", "LONG PAIR", "ONE"],
            "descriptions": [descriptions(2), descriptions(3), descriptions(4), descriptions(2, 300), ["alone"]],
        }
    )
    relationships = pl.DataFrame(
        {"id": ["r"], "source": ["TWO"], "target": ["FOUR"], "descriptions": [["Two meets Four.", "Two met Four."]]}
    )
    tables = {"resolved_entities": entities, "resolved_relationships": relationships, "text_units": pl.DataFrame()}

    def summarised(**section) -> list[str]:
        settings = Settings.model_validate({"summarize_descriptions": section})
        ctx = StepContext(settings=settings, root=Path("."))
        return STEP.items(ctx, tables, 0, {})["item_id"].to_list()

    assert summarised() == ["four", "long_pair"]  # 500 words at most: the long pair is 600
    assert summarised(summarize_from=2) == ["two", "three", "four", "long_pair", "r"]  # Microsoft GraphRAG's
    assert summarised(summarize_from=3, max_length=700) == ["three", "four"]
    joined = with_summaries(entities, relationships)["entities_summarized"]
    assert joined.filter(pl.col("id") == "two")["description"].item() == "\n".join(descriptions(2))
