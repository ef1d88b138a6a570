"""Every answer shape real models write (as recorded in public Microsoft GraphRAG caches of deepseek-r1, mistral,
gpt-4o, gemma and llama answers; these fixtures are written here, in those shapes) parses to exactly its records,
no record swallows another, and `usable_extraction` agrees with `parse_tuples` on every one."""

from __future__ import annotations

import pytest

from graphrag_ray.index.steps.extract_claims import parse_claims, usable_claims
from graphrag_ray.parsing.llm_output import parse_json_object, parse_tuples, says_none, visible_answer


def usable_extraction(output: str) -> bool:
    """What extraction keeps (extract_graph's `usable`, less its example check): a record parses, or it says none."""
    return parse_tuples(output).records > 0 or says_none(output)


A = ("ALICE", "PERSON", "Alice founded the Blue Gate cafe in 2019")
B = ("BLUE GATE", "ORGANIZATION", "A cafe on West Lake")
R = ("ALICE", "BLUE GATE", "Alice runs Blue Gate", 9.0)

SHAPES = {
    "clean": f'("entity"<|>{A[0]}<|>{A[1]}<|>{A[2]})\n##\n("entity"<|>{B[0]}<|>{B[1]}<|>{B[2]})\n##\n'
    f'("relationship"<|>{R[0]}<|>{R[1]}<|>{R[2]}<|>9)\n<|COMPLETE|>',
    # deepseek-r1: closed with '>', or followed by the tuple delimiter
    "closed with >": f'("entity"<|>{A[0]}<|>{A[1]}<|>{A[2]}>  ##\n("entity"<|>{B[0]}<|>{B[1]}<|>{B[2]})<|>\n##\n'
    f'("relationship"<|>{R[0]}<|>{R[1]}<|>{R[2]}<|>9)<|>\n<|COMPLETE|>',
    # mistral: the strength after the bracket, and numbered lines with no record delimiter
    "strength after bracket": f'("entity"<|>{A[0]}<|>{A[1]}<|>{A[2]})\n("entity"<|>{B[0]}<|>{B[1]}<|>{B[2]})\n'
    f'("relationship"<|>{R[0]}<|>{R[1]}<|>{R[2]}){{9}}\n',
    "numbered lines": f'1. ("entity"<|>{A[0]}<|>{A[1]}<|>{A[2]})\n2. ("entity"<|>{B[0]}<|>{B[1]}<|>{B[2]})\n'
    f'3. ("relationship"<|>{R[0]}<|>{R[1]}<|>{R[2]}<|>9)',
    # the silent corruption: numbered records on one line, no delimiter between them
    "numbered on one line": f'("entity"<|>{A[0]}<|>{A[1]}<|>"{A[2]}") 2. ("entity"<|>{B[0]}<|>{B[1]}<|>"{B[2]}") '
    f'3. ("relationship"<|>{R[0]}<|>{R[1]}<|>{R[2]}<|>9)',
    "bulleted": f'- ("entity"<|>{A[0]}<|>{A[1]}<|>{A[2]})\n- ("entity"<|>{B[0]}<|>{B[1]}<|>{B[2]})\n'
    f'* ("relationship"<|>{R[0]}<|>{R[1]}<|>{R[2]}<|>9)',
    # gpt-4o: curly quotes, a broken delimiter before the strength
    "curly quotes": f"(“entity”<|>“{A[0]}”<|>“{A[1]}”<|>“{A[2]}”)\n##\n(“entity”<|>“{B[0]}”<|>“{B[1]}”<|>“{B[2]}”)\n"
    f"##\n(“relationship”<|>“{R[0]}”<|>“{R[1]}”<|>“{R[2]}”<|>9)",
    "broken delimiter": f'("entity"<|>"{A[0]}"<|>"{A[1]}"<|>"{A[2]}")\n##\n("entity"<|>"{B[0]}"<|>"{B[1]}"<|>'
    f'"{B[2]}")\n##\n("relationship"<|>"{R[0]}"<|>"{R[1]}"<|>"{R[2]}"|>9)',
    "prose around": f'Here are the entities I found:\n\n("entity"<|>{A[0]}<|>{A[1]}<|>{A[2]})\n##\n'
    f'("entity"<|>{B[0]}<|>{B[1]}<|>{B[2]})\n##\n("relationship"<|>{R[0]}<|>{R[1]}<|>{R[2]}<|>9)\n\n'
    "Note: the text mentions no other organisations. Let me know if you need more detail.",
    "given twice": f"- **{A[0]}** ({A[1]}): {A[2]}\n- **{B[0]}** ({B[1]}): {B[2]}\n\n"
    f'("entity"<|>{A[0]}<|>{A[1]}<|>{A[2]})\n##\n("entity"<|>{B[0]}<|>{B[1]}<|>{B[2]})\n##\n'
    f'("relationship"<|>{R[0]}<|>{R[1]}<|>{R[2]}<|>9)\n##\n("entity"<|>{A[0]}<|>{A[1]}<|>{A[2]})',
    "think block": f'<think>The user wants ("entity"<|>NOBODY<|>PERSON<|>a thought) records.</think>\n'
    f'("entity"<|>{A[0]}<|>{A[1]}<|>{A[2]})\n##\n("entity"<|>{B[0]}<|>{B[1]}<|>{B[2]})\n##\n'
    f'("relationship"<|>{R[0]}<|>{R[1]}<|>{R[2]}<|>9)\n<|COMPLETE|>',
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_shape_gives_exactly_its_records(shape):
    found = parse_tuples(SHAPES[shape])
    assert [(e["title"], e["type"], e["description"]) for e in found.entities] == [A, B], shape
    assert [(r["source"], r["target"], r["description"], r["weight"]) for r in found.relationships] == [R], shape
    assert found.unparsed == 0
    for text in [e["description"] for e in found.entities] + [r["description"] for r in found.relationships]:
        assert '("entity"' not in text and '("relationship"' not in text and "<|>" not in text


UNUSABLE = [
    "",
    "I apologize for the oversight. However, the text primarily discusses the cafe (and its owner).",
    '("entity"<|>ALICE<|>PERSON<|>cut in the mid',
    "<think>still thinking about ALICE and",
    '("relationship"<|>ALICE<|>BLUE GATE<|>',
    "Sure! Here is the list:\n1. Alice\n2. Blue Gate",
]
NONE_LEFT = [
    "<|COMPLETE|>",
    "No more entities were found.\n<|COMPLETE|>",
    "<think>nothing else in this text</think><|COMPLETE|>",
]


@pytest.mark.parametrize("answer", list(SHAPES.values()) + UNUSABLE + NONE_LEFT)
def test_usable_extraction_agrees_with_the_parser(answer):
    records = parse_tuples(answer)
    says_none = answer in NONE_LEFT
    assert usable_extraction(answer) == (bool(records.entities or records.relationships) or says_none)
    assert usable_extraction(answer) == (answer not in UNUSABLE)


def test_a_long_gleaning_split_by_new_lines_is_read_whole_by_both():
    lines = [f'("entity"<|>NAME {i}<|>PERSON<|>person number {i})' for i in range(48)]
    answer = "\n".join(lines)
    assert len(parse_tuples(answer).entities) == 48 and usable_extraction(answer)


def test_reasoning_text_never_reaches_a_parser():
    assert visible_answer('<think>a\nb</think>\n{"a": 1}') == '{"a": 1}'
    assert visible_answer("reasoning without its opening tag</think>answer") == "answer"
    assert visible_answer("<think>cut off inside the reasoning") == ""
    assert parse_json_object('<think>{"wrong": 1}</think>```json\n{"title": "T"}\n```') == {"title": "T"}


CLAIM = (
    "ALICE",
    "BLUE GATE",
    "OWNERSHIP",
    "TRUE",
    "2019-01-01T00:00:00",
    "NONE",
    "Alice owns Blue Gate",
    "Alice founded the Blue Gate cafe",
)


@pytest.mark.parametrize("shape", ["delimited", "numbered", "curly", "closed with >", "prose around"])
def test_claims_parse_in_every_shape(shape):
    fields = "<|>".join(CLAIM)
    answer = {
        "delimited": f"({fields})\n##\n({fields.replace('ALICE', 'BOB')})\n<|COMPLETE|>",
        "numbered": f"1. ({fields})\n2. ({fields.replace('ALICE', 'BOB')})",
        "curly": f"(“{fields}”)\n##\n(“{fields.replace('ALICE', 'BOB')}”)",
        "closed with >": f"({fields}>\n##\n({fields.replace('ALICE', 'BOB')})<|>",
        "prose around": f"Claims:\n({fields})\n##\n({fields.replace('ALICE', 'BOB')})\nThat is all.",
    }[shape]
    claims, unparsed = parse_claims(answer)
    assert [c["subject_id"] for c in claims] == ["ALICE", "BOB"] and unparsed == 0
    assert claims[0]["end_date"] is None and claims[0]["source_text"] == CLAIM[-1]
    assert usable_claims(answer)
    assert not usable_claims("I could not find any claims in this (short) text.")
    assert usable_claims("<|COMPLETE|>")
