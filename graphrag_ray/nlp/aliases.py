"""Which entity names may be one thing: the name rules of entity resolution ("SHERLOCK HOLMES" / "HOLMES" /
"MR. HOLMES", "S. HOLMES", "李明" / "李老板", full and half width). They only propose candidates; the LLM decides.

Two full names never pair by rule ("JOHN WATSON" / "MARY WATSON" share a surname, not a person): a pair is a short
form (a surname, a name without its title, initials) and a longer name it could stand for.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

LATIN_TITLES = {
    "MR",
    "MRS",
    "MS",
    "MISS",
    "MISTER",
    "DR",
    "DOCTOR",
    "PROF",
    "PROFESSOR",
    "SIR",
    "DAME",
    "LADY",
    "LORD",
    "MADAM",
    "MADAME",
    "CAPT",
    "CAPTAIN",
    "COL",
    "COLONEL",
    "GEN",
    "GENERAL",
    "INSPECTOR",
    "SGT",
    "SERGEANT",
    "REV",
    "FATHER",
    "PRESIDENT",
    "SENATOR",
    "JUDGE",
    "UNCLE",
    "AUNT",
}
LATIN_SUFFIXES = {"JR", "SR", "II", "III", "IV", "PHD", "MD", "ESQ"}
# longest first, so 老板娘 is not read as 老板 + 娘
CJK_TITLES = sorted(
    [
        "先生",
        "女士",
        "小姐",
        "太太",
        "夫人",
        "老板",
        "老板娘",
        "老师",
        "经理",
        "总经理",
        "董事长",
        "医生",
        "大夫",
        "博士",
        "教授",
        "师傅",
        "同学",
        "主任",
        "院长",
        "局长",
        "书记",
        "队长",
        "总",
        "阿姨",
        "大爷",
        "大哥",
        "大姐",
        "哥",
        "姐",
    ],
    key=len,
    reverse=True,
)
CJK_PREFIXES = ("老", "小", "阿")  # 老王, 小李, 阿明: a familiar form of a surname or given name
_CJK = re.compile(r"[\u3400-\u9fff]")
MIN_LATIN_SHORT = 3  # a short form of one or two letters is too weak a clue ("AL", "J")
# The rules that read a name as a person's (a surname alone, initials, a title) apply to people; a part of a name
# also to organisations and places. Identifiers (DWARF-5, R_SECTION) are not names: only width and case pair them.
PERSON_TYPES = {"PERSON", "PEOPLE", "CHARACTER", "人物", "人", "角色"}
NAMED_TYPES = PERSON_TYPES | {
    "ORGANIZATION",
    "ORGANISATION",
    "ORG",
    "COMPANY",
    "GEO",
    "LOCATION",
    "PLACE",
    "GPE",
    "组织",
    "机构",
    "公司",
    "地点",
}
RULES_FOR = {
    "first or last name alone": PERSON_TYPES,
    "initials": PERSON_TYPES,
    "surname with a title": PERSON_TYPES,
    "same name without its title": PERSON_TYPES,
    "part of the name": NAMED_TYPES,
}
_IDENTIFIER = re.compile(r"[0-9_/\\]")


@dataclass(frozen=True)
class NameForm:
    key: str
    core: str  # the name without titles, in upper case, NFKC-folded
    tokens: tuple[str, ...]
    titled: bool  # a title was removed ("MR. HOLMES", "李老板")
    cjk: bool


def name_form(key: str, title: str) -> NameForm:
    text = unicodedata.normalize("NFKC", title).strip()
    if _CJK.search(text):
        core, titled = re.sub(r"\s+", "", text), False
        for t in CJK_TITLES:
            if core.endswith(t) and len(core) > len(t):
                core, titled = core[: -len(t)], True
                break
        if len(core) == 2 and core[0] in CJK_PREFIXES:
            core, titled = core[1:], True
        return NameForm(key, core, (core,), titled, True)
    # a title is a word of its own ("MR. HOLMES", "DR WATSON"), never a part of one ("MS-DOS")
    spaced = text.upper().split()
    titled = False
    while len(spaced) > 1 and spaced[0].rstrip(".") in LATIN_TITLES:
        spaced, titled = spaced[1:], True
    words = [w for w in re.split(r"[\s.,'’\-]+", " ".join(spaced)) if w]
    while len(words) > 1 and words[-1] in LATIN_SUFFIXES:
        words = words[:-1]
    return NameForm(key, " ".join(words), tuple(words), titled, False)


def _titled_surname(short: NameForm, full: NameForm) -> bool:
    """李老板 / 老李 -> 李明: the surname of a 2-4 character name, written with a title."""
    return (
        short.titled
        and len(short.core) <= 2
        and not full.titled
        and 2 <= len(full.core) <= 4
        and full.core.startswith(short.core)
        and len(full.core) > len(short.core)
    )


def _short_stands_for(short: NameForm, full: NameForm) -> str | None:
    """The rule by which `short` could be another way to say `full`, or None."""
    if short.core == full.core:  # each pair once: the titled form (or the first key) is the short one
        if short.titled != full.titled:
            return "same name without its title" if short.titled else None
        return "same name" if short.key < full.key else None
    if short.cjk and full.cjk:
        return "surname with a title" if _titled_surname(short, full) else None
    if short.cjk or full.cjk or _IDENTIFIER.search(short.core) or _IDENTIFIER.search(full.core):
        return None
    if (
        len(short.tokens) > 1
        and all(len(w) == 1 for w in short.tokens[:-1])
        and any(len(f) > 1 for f in full.tokens[:-1])
    ):  # S. HOLMES / S. T. COLERIDGE: initials, then the surname
        if (
            short.tokens[-1] == full.tokens[-1]
            and len(short.tokens) <= len(full.tokens)
            and all(w == f[0] for w, f in zip(short.tokens[:-1], full.tokens))
        ):
            return "initials"
        return None
    if len(short.tokens) >= len(full.tokens):
        return None
    if len(short.tokens) == 1:
        word = short.tokens[0]
        if len(word) >= MIN_LATIN_SHORT and word in (full.tokens[0], full.tokens[-1]):
            return "first or last name alone"
        return None
    return "part of the name" if " ".join(short.tokens) in " ".join(full.tokens) else None


def rule_fits(rule: str, types: set[str]) -> bool:
    """Whether `rule` may pair two entities whose types (upper case) have `types` in common."""
    allowed = RULES_FOR.get(rule)
    return allowed is None or bool(types & allowed)


def rule_pairs(forms: list[NameForm], max_per_name: int = 20) -> list[tuple[str, str, str]]:
    """(short key, full key, rule) for every pair the rules propose, in a deterministic order. Candidates are
    looked up by shared token (Latin) or first character (Chinese), so the cost grows with the names, not their
    square; a short form matching more than `max_per_name` names is too ambiguous to ask about."""
    by_token: dict[str, list[NameForm]] = {}
    for form in forms:
        for token in {form.core[0]} if form.cjk and form.core else set(form.tokens):
            by_token.setdefault(token, []).append(form)
    pairs = []
    for short in sorted(forms, key=lambda f: f.key):
        if not short.core:
            continue
        seen: dict[str, str] = {}
        for token in {short.core[0]} if short.cjk else set(short.tokens):
            for full in by_token.get(token, ()):
                if full.key == short.key or full.key in seen:
                    continue
                rule = _short_stands_for(short, full)
                if rule is not None:
                    seen[full.key] = rule
        if 0 < len(seen) <= max_per_name:
            pairs += [(short.key, full, seen[full]) for full in sorted(seen)]
    return pairs
