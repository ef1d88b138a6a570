"""Entities a question names: whole words or phrases only, rarer first; generic ones never take a slot.

A title matches when its words are a run of the question's words (case-folded; "LA" is not in "later"), or, for a
Chinese title (no spaces to tell words apart), when it stands in the question and no longer title of the index
covers it there (咖啡店 matched, not 咖啡 inside it).
An entity whose words are all stop words, or that is in most text units (a corpus's AMERICAN, THE), is generic:
it names nothing in particular. Of overlapping matches the longest wins.
"""

from __future__ import annotations

import math
import re
from functools import cached_property

from graphrag_ray.config.ranking import RankingConfig
from graphrag_ray.nlp.lexical import CJK_RUN, english_stop_words

_WORD = re.compile(r"[^\W_]+")
DEFAULT_RANKING = RankingConfig()  # generic_share, generic_min_units: local_search.ranking


def words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


class EntityMatcher:
    """Built once per loaded index (IndexData.entity_matcher)."""

    def __init__(self, entity_rows: dict[str, dict], unit_count: int):
        self.units = max(1, unit_count)
        self.rows = entity_rows
        self.by_phrase: dict[tuple[str, ...], list[str]] = {}
        self.chinese: dict[str, list[str]] = {}
        for entity_id, row in entity_rows.items():
            title = row["title"] or ""
            if CJK_RUN.search(title):
                self.chinese.setdefault(title.casefold(), []).append(entity_id)
            phrase = tuple(words(title))
            if phrase and not CJK_RUN.search(phrase[0]):
                self.by_phrase.setdefault(phrase, []).append(entity_id)
        self.lengths = sorted({len(p) for p in self.by_phrase})  # a lookup per word and phrase length
        self._asked: dict[tuple, tuple[tuple[str, float], ...]] = {}  # the last questions' answers

    @cached_property
    def _chinese_lengths(self) -> list[int]:
        return sorted({len(t) for t in self.chinese})

    def _chinese_spans(self, query: str) -> list[tuple[int, int, str]]:
        """(start, end, entity id) of every Chinese title standing in the query (a lookup per position and length)."""
        spans = []
        for i in range(len(query)):
            for length in self._chinese_lengths:
                if i + length > len(query):
                    break
                spans += [(i, i + length, e) for e in self.chinese.get(query[i : i + length], ())]
        return spans

    def generic(self, entity_id: str, ranking: RankingConfig = DEFAULT_RANKING) -> bool:
        """Names nothing in particular: its words are all stop words, or it is in more than `generic_share` of the
        text units (in an index of at least `generic_min_units`)."""
        row = self.rows[entity_id]
        phrase = words(row["title"] or "")
        if not phrase or all(w in english_stop_words() for w in phrase):
            return True
        spread = len(row["text_unit_ids"] or [])
        return self.units >= ranking.generic_min_units and spread > ranking.generic_share * self.units

    def rarity(self, entity_id: str) -> float:
        """log(1 + units / units holding it): a name in one passage outweighs one in fifty."""
        return math.log(1 + self.units / max(1, len(self.rows[entity_id]["text_unit_ids"] or [])))

    def named(self, query: str, ranking: RankingConfig = DEFAULT_RANKING) -> list[tuple[str, float]]:
        """(entity id, rarity) of the entities the query names, rarest first; generic ones left out. (Asked twice
        per local query - for the slots and for the walk's seeds - it is worked out once.)"""
        key = (query, ranking.generic_share, ranking.generic_min_units)
        if key not in self._asked:
            if len(self._asked) >= 64:
                self._asked.clear()
            self._asked[key] = self._named(query, ranking)
        return list(self._asked[key])

    def _named(self, query: str, ranking: RankingConfig) -> tuple[tuple[str, float], ...]:
        spans: list[tuple[int, int, str]] = []  # (start, end) in the query's words
        written = _WORD.findall(query)
        said = [w.casefold() for w in written]
        # a question written in mixed case capitalises what it names: there "place" and "director" are words, not
        # the corpus's PLACE and DIRECTOR (one typed all in lower or upper case says nothing by its case)
        cased = any(c.isupper() for c in query) and any(c.islower() for c in query)
        for i in range(len(said)):
            for length in self.lengths:
                if i + length > len(said):
                    break
                found = self.by_phrase.get(tuple(said[i : i + length]))
                if not found or (
                    cased and not any(w[:1].isupper() or w[:1].isdigit() for w in written[i : i + length])
                ):
                    continue
                spans += [(i, i + length, entity_id) for entity_id in found]
        longest = _maximal(spans)
        if self.chinese and CJK_RUN.search(query):
            longest += _maximal(self._chinese_spans(query.casefold()))
        found = [e for e in dict.fromkeys(longest) if not self.generic(e, ranking)]
        return tuple(
            sorted(((e, self.rarity(e)) for e in found), key=lambda p: (-p[1], -len(self.rows[p[0]]["title"])))
        )


def _maximal(spans: list[tuple[int, int, str]]) -> list[str]:
    """The entities of the spans no longer span covers (aliases with the same words all stay)."""
    kept = []
    for start, end, entity_id in spans:
        if not any(s <= start and end <= e and (e - s) > (end - start) for s, e, _ in spans):
            kept.append(entity_id)
    return kept
