"""One table of query methods (query/methods.py): a method registered there is a choice of the command line, a
model name of `serve`, a method of `eval`, and gets its engine - with nothing else to edit."""

from __future__ import annotations

import pytest

from graphrag_ray.errors import UsageError
from graphrag_ray.query.local import LocalSearch
from graphrag_ray.query.methods import (
    METHODS,
    MethodSpec,
    check_method,
    engine_class,
    eval_methods,
    query_methods,
    register_method,
    served_methods,
)
from graphrag_ray.serve.protocol import Target, model_names, resolve_model


@pytest.fixture
def registered():
    register_method("local_plus", MethodSpec("graphrag_ray.query.local:LocalSearch", "local_search"))
    yield "local_plus"
    METHODS.pop("local_plus")


def test_a_registered_method_is_a_choice_everywhere(registered):
    assert check_method("who?", registered) == registered
    with pytest.raises(UsageError, match="local_plus"):  # the list of choices a wrong name prints
        check_method("who?", "nosuch")
    assert f"books/{registered}" in model_names(["books"]) and registered in model_names(["books"])
    assert resolve_model(f"books/{registered}", ["books"]) == Target(("books",), registered)
    assert resolve_model(f"graphrag-{registered}-search", ["books"]) == Target(("books",), registered)
    assert registered in eval_methods()
    assert engine_class(registered) is LocalSearch


def test_the_views_follow_the_table():
    assert query_methods() == ("local", "global", "drift", "basic", "hybrid", "auto")
    assert served_methods() == query_methods()
    assert eval_methods() == ("local", "global", "drift", "basic", "hybrid", "evidence")
    assert "all/global" in model_names(["a", "b"]) and "all/drift" not in model_names(["a", "b"])
    with pytest.raises(ValueError, match="exists already"):
        register_method("local", METHODS["local"])
    for name, spec in METHODS.items():  # every engine the table names exists
        if spec.engine:
            assert engine_class(name).method == name


def test_batches_of_a_table_keep_every_row_once_within_the_budget():
    from graphrag_ray.query.context.budget import pack_batches, pack_table

    def count(text: str) -> int:
        return len(text.split())

    rows = [[i, "word " * (i % 7 + 1)] for i in range(40)] + [[99, "huge " * 50]] + [[100, "tail"]]
    batches = pack_batches("Reports", ["id", "text"], rows, count, 20, alone=lambda r: [r[0], "(too long)"])
    assert [(s, e) for _, s, e in batches][-2:] == [(40, 41), (41, 42)]  # the huge row alone, then the rest
    assert [s for _, s, _ in batches] == [0] + [e for _, _, e in batches][:-1]  # contiguous, every row once
    for text, start, end in batches:
        if end - start > 1 or start != 40:
            assert count(text) <= 20 and text == pack_table("Reports", ["id", "text"], rows[start:end], count, 20)[0]
    assert "(too long)" in batches[-2][0] and "huge" not in batches[-2][0]
