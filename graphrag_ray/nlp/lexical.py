"""The lexical index: BM25 over text units, entities and reports, published with the index (`lexical/<table>/`).

bm25s (sparse-matrix BM25, numpy only): it scores a query by summing the posting columns of its few terms instead
of visiting every document as rank_bm25 does, saves to plain .npy/.json files that load memory-mapped (a query
never imports LanceDB for it), and is maintained. Words are case-folded; English stop words are left out;
Chinese is read as overlapping character pairs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np

CJK_RUN = re.compile(r"[\u3400-\u9fff]+")
_WORD = re.compile(r"[^\W_]+")
LEXICAL_DIR = "lexical"
# what each table's documents are: the columns joined, in this order
LEXICAL_TABLES = {
    "text_units": ("text",),
    "entities": ("title", "description"),
    "community_reports": ("title", "summary"),
}


@lru_cache(maxsize=1)
def english_stop_words() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def tokens(text: str) -> list[str]:
    """The words BM25 counts: case-folded, no English stop words; Chinese as overlapping character pairs (Lucene's
    CJK analyzer): no dictionary to load - jieba's takes longer than the rest of a query command - and no name split
    the way a dictionary would not know it."""
    out: list[str] = []
    lowered = text.casefold()
    position = 0
    for run in CJK_RUN.finditer(lowered):
        out += _latin(lowered[position : run.start()])
        chars = run.group()
        out += [chars[i : i + 2] for i in range(len(chars) - 1)] if len(chars) > 1 else [chars]
        position = run.end()
    out += _latin(lowered[position:])
    return out


def _latin(text: str) -> list[str]:
    stop = english_stop_words()
    return [w for w in _WORD.findall(text) if w not in stop]


class LexicalIndex:
    """BM25 over one table's rows, by row id."""

    def __init__(self, ids: list[str], retriever):
        self.ids, self.retriever = ids, retriever
        self.vocab = retriever.vocab_dict

    @classmethod
    def build(cls, ids: list[str], texts: Iterable[str]) -> LexicalIndex:
        """BM25 over `texts` (one per id, read once, in order). Each text's words become an int32 array of word
        ids as it is read: bm25s given the words themselves holds every word of the corpus as a Python string, twice
        (the words, then their ids) - at 100M tokens, gigabytes in the process publishing the index."""
        import bm25s

        vocab: dict[str, int] = {}
        corpus = _WordIds()
        for text in texts:
            corpus.append(np.fromiter((vocab.setdefault(w, len(vocab)) for w in tokens(text)), dtype=np.int32))
        if not vocab and corpus:  # an empty document still takes its row (bm25s needs at least one word)
            corpus[0] = np.asarray([vocab.setdefault("\x00", 0)], dtype=np.int32)
        retriever = bm25s.BM25()
        retriever.index((corpus, vocab), show_progress=False)
        return cls(list(ids), retriever)

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.retriever.save(str(folder))
        (folder / "ids.json").write_text(json.dumps(self.ids, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, folder: Path) -> LexicalIndex:
        import bm25s

        ids = json.loads((folder / "ids.json").read_text(encoding="utf-8"))
        return cls(ids, bm25s.BM25.load(str(folder), mmap=True))

    def _terms(self, query: str) -> list[int]:
        return [self.vocab[t] for t in dict.fromkeys(tokens(query)) if t in self.vocab]

    @cached_property
    def _position(self) -> dict[str, int]:
        return {row: i for i, row in enumerate(self.ids)}

    def scores(self, query: str, ids: list[str]) -> list[float]:
        """The BM25 score of each row in `ids` for `query` (0 for a row the index does not hold)."""
        terms = self._terms(query)
        if not terms or not self.ids:
            return [0.0] * len(ids)
        every = self.retriever.get_scores(terms)
        return [float(every[self._position[row]]) if row in self._position else 0.0 for row in ids]

    def spread(self, text: str) -> float:
        """The share of rows holding `text`'s rarest word (0 for a word no row holds): an upper bound on the rows
        holding all of it, read from the postings' lengths."""
        terms = [self.vocab.get(t) for t in dict.fromkeys(tokens(text))]
        if not terms or not self.ids:
            return 0.0
        indptr = self.retriever.scores["indptr"]
        return min(0 if t is None else int(indptr[t + 1] - indptr[t]) for t in terms) / len(self.ids)

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """(row id, score) of the k best rows with a positive score, best first (ties: table order)."""
        terms = self._terms(query)
        if not terms or not self.ids:
            return []
        scores = np.asarray(self.retriever.get_scores(terms), dtype=np.float64)
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        order = sorted((int(i) for i in top if scores[i] > 0), key=lambda i: (-scores[i], i))
        return [(self.ids[i], float(scores[i])) for i in order]


class _WordIds(list):
    """Each document's word ids as an int32 array, handed to bm25s one at a time as the list of ints it reads: it
    walks the corpus a few times, and only the document in hand is ever a list of Python ints."""

    def __iter__(self) -> Iterator[list[int]]:
        return (ids.tolist() for ids in list.__iter__(self))


def write_lexical(folder: Path, tables: Mapping) -> None:
    """Every lexical table of a new index version, from its published tables - read one at a time, when `tables`
    reads them when asked (the run's RunTables: the text units alone are ~0.4 GB at 100M tokens)."""
    for name, columns in LEXICAL_TABLES.items():
        table = tables[name] if name in tables else None
        if table is None or not table.height:
            continue
        ids, texts = table["id"].to_list(), joined(table, columns)
        del table  # the texts' reader holds the only reference: read through, the table goes before BM25 is built
        LexicalIndex.build(ids, texts).save(Path(folder) / LEXICAL_DIR / name)


def joined(table, columns: tuple[str, ...], rows_at_once: int = 10_000) -> Iterator[str]:
    """Each row's `columns` joined by ": ", read a slice of rows at a time (not a list of every text at once)."""
    for start in range(0, table.height, rows_at_once):
        part = table.slice(start, rows_at_once)
        yield from (": ".join(p for p in row if p) for row in zip(*(part[c].fill_null("").cast(str) for c in columns)))


def reciprocal_rank_fusion(rankings: list[list[str]], k: int = 60) -> list[str]:
    """Ids by the sum of 1 / (k + rank) over the rankings they are in (Cormack et al.'s RRF, k = 60)."""
    score: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking):
            score[item] = score.get(item, 0.0) + 1.0 / (k + rank + 1)
    return sorted(score, key=lambda i: -score[i])
