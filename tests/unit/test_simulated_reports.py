"""The simulator's reports, as a model writes them: a revision keeps a fresh report's limits, so an update's report
lengths (and the tokens spent embedding and revising them later) follow the change, not the simulator."""

import json

from graphrag_ray.config.prompts import default_prompts, fill
from graphrag_ray.index.operations.report_context import changes_context, local_context
from graphrag_ray.index.operations.reports import render_markdown
from graphrag_ray.simulate.responders import respond


def entity(n: int, description: str) -> dict:
    return {"human_readable_id": n, "title": f"PERSON {n}", "description": description, "degree": 2}


def relationship(n: int, a: int, b: int) -> dict:
    return {
        "human_readable_id": n,
        "source": f"PERSON {a}",
        "target": f"PERSON {b}",
        "description": f"PERSON {a} works with PERSON {b} on the harbour project.",
        "combined_degree": 4,
    }


def answer(prompt: str) -> tuple[str, dict]:
    kind, content = respond({"messages": [{"role": "user", "content": prompt}]})
    return kind, json.loads(content)


def test_a_revision_is_no_longer_than_a_report_written_afresh():
    prompts = default_prompts()
    entities = [
        entity(n, f"PERSON {n} is a harbour pilot who has guided ships into the port for {n} years. " * 4)
        for n in range(1, 6)
    ]
    relationships = [relationship(10 + n, n, n + 1) for n in range(1, 5)]
    kind, fresh = answer(
        fill(prompts["community_report.txt"], input_text=local_context(entities, relationships), max_report_length=500)
    )
    assert kind == "community_report" and len(fresh["findings"]) == 4
    previous = render_markdown(fresh)
    # one entity's description changed, no relationship did: nothing to add as a finding
    changed = {
        "entities": [entity(3, "PERSON 3 retired from piloting and now trains new harbour pilots. " * 4)],
        "relationships": [],
        "removed_entities": [],
        "removed_relationships": [],
    }
    kind, revised = answer(
        fill(
            prompts["community_report_update.txt"],
            previous_report=previous,
            input_text=changes_context(changed),
            max_report_length=500,
        )
    )
    assert kind == "community_report_revision"
    assert [f["summary"] for f in revised["findings"]] == [f["summary"] for f in fresh["findings"]]
    assert "retired from piloting" in revised["summary"], "the change is in the summary"
    assert len(revised["summary"]) <= len(fresh["summary"].split(" [Data: ")[0]) + len(" [Data: Entities (3)]")
    assert len(render_markdown(revised)) <= len(previous) + 40
    # a changed relationship is written again, in front; a removed entity's findings go
    changed = {
        "entities": [],
        "relationships": [{**relationship(12, 2, 3), "description": "They split up."}],
        "removed_entities": [[5, "PERSON 5"]],
        "removed_relationships": [],
    }
    _, revised = answer(
        fill(
            prompts["community_report_update.txt"],
            previous_report=previous,
            input_text=changes_context(changed),
            max_report_length=500,
        )
    )
    summaries = [f["summary"] for f in revised["findings"]]
    assert summaries[0] == "PERSON 2 - PERSON 3" and "They split up." in revised["findings"][0]["explanation"]
    assert "PERSON 4 - PERSON 5" not in summaries and len(summaries) == 3
