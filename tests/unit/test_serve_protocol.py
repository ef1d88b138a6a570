"""Model names and reply shapes of `serve` (no server needed)."""

from __future__ import annotations

import pytest

from graphrag_ray.errors import UsageError
from graphrag_ray.serve.index_service import history_of
from graphrag_ray.serve.protocol import ModelNotFound, Target, model_names, resolve_model

TWO = ["coffee_shop", "lighthouse"]


def test_model_names_pick_the_index_and_the_method():
    assert resolve_model("coffee_shop/global", TWO) == Target(("coffee_shop",), "global")
    assert resolve_model("lighthouse/local:latest", TWO) == Target(("lighthouse",), "local")
    assert resolve_model("all/global", TWO) == Target(("coffee_shop", "lighthouse"), "global")
    assert resolve_model("lighthouse+coffee_shop/local", TWO) == Target(("lighthouse", "coffee_shop"), "local")
    assert resolve_model("basic", ["coffee_shop"]) == Target(("coffee_shop",), "basic")
    assert resolve_model("graphrag-global-search:latest", ["coffee_shop"]) == Target(("coffee_shop",), "global")
    assert resolve_model("graphrag", ["coffee_shop"]) == Target(("coffee_shop",), "auto")
    for wrong, said in (
        ("local", "name an index"),
        ("nowhere/local", "no index named 'nowhere'"),
        ("coffee_shop/fastest", "unknown method 'fastest'"),
        ("", "name an index"),
    ):
        with pytest.raises(ModelNotFound, match=said):
            resolve_model(wrong, TWO)


def test_every_listed_name_resolves():
    for indexes in (TWO, ["coffee_shop"]):
        names = model_names(indexes)
        assert len(names) == len(set(names))
        for name in names:
            assert set(resolve_model(name, indexes).indexes) <= set(indexes)
    assert "all/global" in model_names(TWO) and "all/global" not in model_names(["coffee_shop"])


def test_the_last_user_message_is_the_question_and_the_rest_its_history():
    question, history = history_of(
        [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "Who is Ada Marsh?"},
            {"role": "assistant", "content": "The keeper."},
            {"role": "user", "content": [{"type": "text", "text": "And her "}, {"type": "text", "text": "brother?"}]},
        ]
    )
    assert question == "And her brother?"
    assert [(t.role.value, t.content) for t in history.turns] == [
        ("user", "Who is Ada Marsh?"),
        ("assistant", "The keeper."),
    ]
    with pytest.raises(UsageError, match="last message must be the user's question"):
        history_of([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])


def test_query_settings_come_from_ollama_options_or_the_top_level():
    from graphrag_ray.serve.requests import options_of, parse_body

    body = parse_body(
        b'{"model": "x", "messages": [{"role": "user", "content": "q"}], '
        b'"options": {"community_level": 1, "response_type": "nested"}, "response_type": "top"}',
        "ollama_chat",
        200,
    )
    assert options_of(body) == {"community_level": 1, "response_type": "top"}  # the top level wins where set
