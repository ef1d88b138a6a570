"""The lexical index scores as bm25s does from the words themselves, though it hands bm25s word ids one document
at a time; it is built from texts read once, in order."""

from __future__ import annotations

import bm25s
import numpy as np
import polars as pl

from graphrag_ray.nlp.lexical import LexicalIndex, joined, tokens

TEXTS = [
    "Basal cell skin cancer, also known as basal cell carcinoma (BCC), is the most common skin cancer.",
    "Imaging tests such as CT and MRI are used for surveillance of nasopharyngeal carcinoma.",
    "",
    "李明在杭州开了一家咖啡店，咖啡豆来自云南。",
    "Radioactive iodine (RAI) treatment is used for some thyroid cancers; RAI is given as a pill.",
]
QUESTIONS = ["Which imaging tests are used?", "basal cell carcinoma", "RAI thyroid", "咖啡店在哪里", "nothing here"]


def test_scores_equal_bm25s_built_from_the_words():
    ours = LexicalIndex.build([f"t{i}" for i in range(len(TEXTS))], iter(TEXTS))
    theirs = bm25s.BM25()
    theirs.index([tokens(t) for t in TEXTS], show_progress=False)
    for question in QUESTIONS:
        words = [w for w in dict.fromkeys(tokens(question)) if w in theirs.vocab_dict]
        expected = theirs.get_scores([theirs.vocab_dict[w] for w in words]) if words else np.zeros(len(TEXTS))
        assert np.allclose(ours.scores(question, ours.ids), expected), question
    assert [row for row, _ in ours.search("RAI thyroid", 2)] == ["t4"]
    assert ours.search("imaging surveillance", 1)[0][0] == "t1"


def test_a_corpus_of_empty_texts_still_builds_and_finds_nothing():
    empty = LexicalIndex.build(["a", "b"], iter(["", "  "]))
    assert empty.search("anything", 3) == [] and empty.scores("anything", ["a", "b"]) == [0.0, 0.0]


def test_joined_reads_the_columns_of_every_row_in_order_a_slice_at_a_time():
    table = pl.DataFrame({"title": ["A", None, "C"], "description": ["one", "two", None]})
    assert list(joined(table, ("title", "description"), rows_at_once=2)) == ["A: one", "two", "C"]


def test_spread_is_the_share_of_rows_holding_the_rarest_word():
    index = LexicalIndex.build([f"t{i}" for i in range(len(TEXTS))], iter(TEXTS))
    assert index.spread("carcinoma") == 2 / 5  # t0 and t1
    assert index.spread("basal cell carcinoma") == 1 / 5  # its rarest word, basal: t0 only
    assert index.spread("RAI") == 1 / 5 and index.spread("unheard of") == 0.0 and index.spread("the") == 0.0
