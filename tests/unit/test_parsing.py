from hypothesis import given, settings
from hypothesis import strategies as st

from graphrag_ray.config.prompts import fill, load_prompt
from graphrag_ray.parsing.llm_output import example_names, parse_json_object, parse_tuples

GOOD = (
    '("entity"<|>李明<|>PERSON<|>李明在杭州开了一家咖啡店)\n##\n'
    '("entity"<|>ACME CORP<|>ORGANIZATION<|>A company)\n##\n'
    '("relationship"<|>李明<|>ACME CORP<|>李明 works with Acme<|>7)\n<|COMPLETE|>'
)


def test_parses_graphrag_tuple_format():
    out = parse_tuples(GOOD)
    assert [e["title"] for e in out.entities] == ["李明", "ACME CORP"]
    assert out.entities[0]["type"] == "PERSON"
    assert out.relationships == [
        {"source": "李明", "target": "ACME CORP", "description": "李明 works with Acme", "weight": 7.0}
    ]
    assert out.unparsed == 0


def test_counts_what_it_cannot_parse_and_keeps_the_rest():
    messy = (
        GOOD.replace("<|COMPLETE|>", "") + '\n##\n("entity"<|>BROKEN\n##\nrandom prose here\n##\n'
        '("relationship"<|>A<|>A<|>self loop<|>3)'
    )
    out = parse_tuples(messy)
    assert len(out.entities) == 2 and len(out.relationships) == 1
    assert out.unparsed == 2  # the broken record and the self loop; prose between records is not a record


def test_relationship_without_numeric_strength_defaults_to_one():
    out = parse_tuples('("relationship"<|>A<|>B<|>linked<|>strong)')
    assert out.relationships[0]["weight"] == 1.0


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parser_never_raises(text):
    parse_tuples(text)
    parse_json_object(text)


def test_json_object_tolerates_fences_and_prose():
    assert parse_json_object('```json\n{"a": 1}\n```') == {"a": 1}
    assert parse_json_object('Here you go: {"title": "x"} thanks') == {"title": "x"}
    assert parse_json_object("[1, 2]") is None and parse_json_object("nope") is None


def test_fill_is_single_pass_and_keeps_literal_braces():
    template = 'Text: {input_text}\nTypes: {entity_types}\nJSON: {{"a": 1}} {unknown}'
    out = fill(template, input_text="evil {entity_types} text", entity_types="PERSON")
    assert out == 'Text: evil {entity_types} text\nTypes: PERSON\nJSON: {"a": 1} {unknown}'


def test_a_strength_after_a_slashed_delimiter_is_the_weight_not_part_of_the_description():
    """Recorded from a real model: `"</|>8` (a `</|>` for the tuple delimiter) before the strength."""
    from graphrag_ray.parsing.llm_output import parse_tuples

    found = parse_tuples('("relationship"<|>ALICE<|>BOB<|>Alice employs Bob"</|>8)##<|COMPLETE|>')
    assert found.relationships == [
        {"source": "ALICE", "target": "BOB", "description": "Alice employs Bob", "weight": 8.0}
    ]


def test_a_gleaning_of_numbered_lines_without_the_record_kind_keeps_its_entities():
    from graphrag_ray.parsing.llm_output import parse_tuples

    found = parse_tuples(
        '1. ("CAROL DIAZ"<|>PERSON<|>A chemist in Lima)\n'
        '2. ("ACME CORP"<|>ORGANIZATION<|>A company)\n'
        '3. ("CAROL DIAZ"<|>"ACME CORP"<|>Carol works for Acme<|>7)\n<|COMPLETE|>'
    )
    assert [(e["title"], e["type"]) for e in found.entities] == [
        ("CAROL DIAZ", "PERSON"),
        ("ACME CORP", "ORGANIZATION"),
    ]
    assert [(r["source"], r["target"], r["weight"]) for r in found.relationships] == [("CAROL DIAZ", "ACME CORP", 7.0)]
    assert found.unparsed == 0
    # prose lines with brackets but no tuple delimiter are no records
    assert parse_tuples("1. (none found)\n<|COMPLETE|>").records == 0


def test_our_prompts_single_bar_records_parse_like_microsofts_and_a_bar_in_a_description_stays_in_it():
    """The default prompt asks for `("entity"|NAME|TYPE|DESC)` a line (fewer output tokens than `<|>` and `##`);
    the simulator answers it as its worked examples write records, and the parser reads both delimiters."""
    from graphrag_ray.simulate.shapes import in_prompts_delimiter

    prompt = fill(load_prompt(None, "prompts/extract_graph.txt"), entity_types="PERSON", input_text="x")
    ours = in_prompts_delimiter("extract_graph", GOOD, prompt)
    assert "<|>" not in ours and "##" not in ours and ours.count("\n") == 3
    assert parse_tuples(ours) == parse_tuples(GOOD)
    piped = parse_tuples('("entity"|PIPE WORKS|ORGANIZATION|makes a | b valves)\n("relationship"|A|B|a | b|4)')
    assert piped.entities[0]["description"] == "makes a b valves" and piped.relationships[0]["weight"] == 4.0
    assert "TIDEWATER ROASTERS" in example_names(prompt) and "周岚" in example_names(prompt)
    # a Microsoft GraphRAG prompt's answer keeps its format (and parses as it always has)
    assert in_prompts_delimiter("extract_graph", GOOD, 'Format ... ("entity"<|>NAME...') == GOOD
