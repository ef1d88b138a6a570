"""Entity spotting: jieba POS tags for Chinese, capitalised phrases for English; mixed text works."""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass

_SENTENCE_END = re.compile(r"[。！？!?；;]+|\.(?=\s)|\n+")
_CJK = re.compile(r"[\u3400-\u9fff]")
# lower-case words inside a name (Ermengarde of Tours, Mohammed bin Salman); "and" joins two names as often as it
# sits inside one, so a phrase is split there ("Nicki Minaj and Lil Wayne": two people, each linking its pages)
_EN_JOINERS = (
    "of",
    "the",
    "and",
    "de",
    "la",
    "van",
    "von",
    "for",
    "bin",
    "ibn",
    "bint",
    "del",
    "della",
    "der",
    "den",
    "du",
    "da",
    "di",
    "dos",
    "das",
)
_POSSESSIVE = re.compile(r"['’]s?$")  # Frank Sinatra's album: the name is Frank Sinatra
# a name's words are separated by spaces or tabs, never by a line break: a title on its own line ("Christopher
# Nolan\nChristopher Edward Nolan is ...") ends where its line does, as a heading, a list item or a table cell does
_SAME_LINE = r"[^\S\r\n]"
_EN_PHRASE = re.compile(
    rf"\b[A-Z][\w'’&-]*(?:{_SAME_LINE}+(?:" + "|".join(_EN_JOINERS) + rf")?{_SAME_LINE}*[A-Z][\w'’&-]*)*"
)
_EN_STOP = {
    "The",
    "A",
    "An",
    "In",
    "On",
    "At",
    "He",
    "She",
    "It",
    "They",
    "We",
    "I",
    "This",
    "That",
    "These",
    "Those",
    "His",
    "Her",
    "Their",
    "Our",
    "But",
    "And",
    "Or",
    "If",
    "When",
    "After",
    "Before",
    "As",
    "For",
    "From",
    "To",
    "By",
    "With",
    "While",
    "Then",
    "There",
    "Here",
    "Its",
    "Also",
    "However",
    "Mr",
    "Mrs",
    "Ms",
    "Dr",
    "One",
    "Two",
    "Yes",
    "No",
    "What",
    "Who",
    "Why",
    "How",
    "Where",
    "Which",
}
_ORG_WORDS = (
    "Inc",
    "Corp",
    "Company",
    "University",
    "Bank",
    "Institute",
    "Association",
    "Committee",
    "Ministry",
    "Agency",
    "Council",
    "Group",
    "Ltd",
    "LLC",
    "Foundation",
    "Party",
    "School",
)
_GEO_PREP = re.compile(r"\b(?:in|at|from|to|near|across|into)\s+$", re.I)
_ZH_TYPES = {"nr": "PERSON", "nrfg": "PERSON", "nrt": "PERSON", "ns": "GEO", "nt": "ORGANIZATION", "nz": "OTHER"}
_EN_TITLES = ("Mr", "Mrs", "Ms", "Dr", "Prof", "Sir", "Madam", "President", "Professor", "Captain", "General")
_TITLE_BEFORE = re.compile(r"\b(?:" + "|".join(_EN_TITLES) + r")\.?\s+$")
_NAME_WORD = re.compile(r"[A-Z][a-z'’-]+$")  # Ada, O'Neil: a capitalised word, not an acronym or ALL-CAPS markup
# A word alone that is capitalised because it opens something, not because it is a name. A date is no entity: a
# calendar word alone is never one. The common words of prose and technical writing that open a sentence or a list
# item ("Add support for ...", "Some users ...", "Don't ...") are not either; other words are judged by the text
# (`_OpeningWords`).
_CALENDAR = frozenset(
    """Mon Tue Tues Wed Thu Thur Thurs Fri Sat Sun Monday Tuesday Wednesday Thursday Friday Saturday
Sunday Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec January February March April May June July August September
October November December""".split()
)
_EN_COMMON = frozenset(
    """
Add Added Adds Adding Fix Fixed Fixes Fixing Remove Removed Removes Update Updated Updates Use Used Uses Using Make
Makes Made Do Does Don't Don’t Doesn't Set Move Moved Revert Reverted Change Changed Changes Allow Allowed Allows
Support Supported Close Closes Closed Build Built Check Checked Run Runs Apply Applied Drop Dropped Bump Bumped
Include Included Includes Adjust Adjusted Regenerate Regenerated Improve Improved Install Installed Document
Documented Note Notes See Some All Any Each Every Many More Most Much New Now Not Only Please Thanks Thank Likewise
So You Your Is Are Was Were Be Can Cannot Should Will Would Could Must Let Get Got Avoid Enable Enabled Disable
Disabled Rename Renamed Replace Replaced Merge Merged Handle Call Return Create Created Delete Deleted Ensure Try
Keep Pass Split Clean Refresh Rebuild Rewrite Simplify Prefer Correct Corrected Convert Other Both Such Same Several
Few Since Because Although Until Unless Yet Still Just Even Instead Otherwise Perhaps First Second Third Last Next
Previous Default Initial Minor Major Small Large Various General Generic Common Possible""".split()
)
# what comes just before a word that opens a line, a list item or a bracket - or a sentence - in the 12 characters
# before it (a window of blanks alone is inside a line's indentation)
_OPENS_LINE = r"(?:^|\n)[ \t]*(?:[*•+>#-]+[ \t]*)?|[(\[][ \t]*"  # a line, a list item, a bracket
_LINE_OPENING = re.compile(f"(?:{_OPENS_LINE})$")
_EN_WORD = re.compile(r"[\w'’&-]+")  # a word as the name pattern sees one (Don't, AT&T, Build-Depends)
_SENTENCE_OPENING = re.compile(rf"(?:[.!?;:]\s+|{_OPENS_LINE})$")
# Chinese common nouns every technical or everyday text uses: never distinctive enough to be an entity
ZH_GENERIC = frozenset(
    """选项 文件 命令 用户 信息 系统 参数 程序 数据 内容 方法 问题 时间 情况 部分 方式 结果 功能 类型
名称 目录 格式 设置 配置 默认 输出 输入 错误 说明 模式 对象 文本 行为 操作 条件 作用 地方 东西 事情 工作 过程 例子 例如
""".split()
)


@dataclass(frozen=True)
class Mention:
    name: str
    type: str  # PERSON, GEO, ORGANIZATION, OTHER (proper noun of unknown kind) or CONCEPT (common noun)
    start: int


def sentences_naming(texts: list[str], names: list[str]) -> dict[str, list[int]]:
    """For each entity title, the positions of the sentences that name it (English titles are upper-cased:
    compared with the upper-cased sentence; Chinese ones as written). Each sentence is upper-cased once: testing
    every pair of a text unit's names against every sentence upper-cased it once per test."""
    uppers = [text.upper() for text in texts]
    return {
        name: [
            i
            for i, (text, upper) in enumerate(zip(texts, uppers))
            if (name in upper if name.isascii() else name in text)
        ]
        for name in names
    }


def sentences(text: str) -> list[tuple[int, str]]:
    """(offset, sentence) pairs; Chinese and English punctuation."""
    out, start = [], 0
    for end in _SENTENCE_END.finditer(text):
        piece = text[start : end.end()]
        if piece.strip():
            out.append((start + len(piece) - len(piece.lstrip()), piece.strip()))
        start = end.end()
    if text[start:].strip():
        out.append((start + len(text[start:]) - len(text[start:].lstrip()), text[start:].strip()))
    return out


@functools.lru_cache(maxsize=1)
def _jieba():
    import logging

    import jieba
    import jieba.posseg

    jieba.setLogLevel(logging.WARNING)
    return jieba.posseg


_HEADING = re.compile(r"#{1,6}[^\S\n]+(.+?)[^\S\n]*#*[^\S\n]*$")
TITLE_MAX_CHARS, TITLE_MAX_WORDS = 120, 15


def title_line(text: str) -> str | None:
    """The title a text opens with, on a line of its own: a Markdown heading (`# Title`), or a short first line
    followed by more text that does not end as a sentence or a clause does (`Christopher Nolan\nChristopher Edward
    Nolan is ...`). None when the text opens with prose."""
    body = text.lstrip()
    line, newline, rest = body.partition("\n")
    line = line.strip()
    if heading := _HEADING.fullmatch(line):
        return heading.group(1).strip() or None
    if not newline or not rest.strip() or not line or len(line) > TITLE_MAX_CHARS:
        return None
    if len(line.split()) > TITLE_MAX_WORDS or line[-1] in ".!?。！？:;,，；：、" or not any(c.isalpha() for c in line):
        return None
    if len(line.split()) >= 2 and line.isupper() or any(c in line for c in "<>{}=|"):
        return None  # an ALL-CAPS line is boilerplate ("MAIN CONTENT STARTS HERE"), one with markup is no title
    return line


_FILE_NAME = re.compile(r"[^\s/\\]+\.[A-Za-z0-9]{1,5}(?:#\d+)?")


def given_title(title: str | None) -> str | None:
    """A document's `title` column as a name: None when it is no title a reader would use - a file name
    (`report.txt`, `corpus.csv#12`, what the loader writes when the input gives no title), empty, or longer than a
    heading (`title_line`'s limits)."""
    title = " ".join((title or "").split())
    if not title or _FILE_NAME.fullmatch(title) or len(title) > TITLE_MAX_CHARS:
        return None
    if len(title.split()) > TITLE_MAX_WORDS or not any(c.isalpha() for c in title):
        return None
    return title


def titles_of(text: str, document_title: str | None, document_head: str | None = None) -> list[str]:
    """The names a text unit has by its place, whatever its words: its document's title (`given_title`) and a
    title on its first line (`title_line`) - when `document_head` is given, only in the document's first unit (a
    chunk cut mid-document may open with any short line) - once each."""
    opening, head = text.lstrip(), (document_head or "").lstrip()
    shared = min(len(opening), len(head), 100)
    first = document_head is None or opening[:shared] == head[:shared]
    found: dict[str, str] = {}
    for title in (given_title(document_title), title_line(text) if first else None):
        if title:
            found.setdefault(title.casefold(), title)
    return list(found.values())


def mentions(text: str, concept_min_count: int = 2, document_title: str | None = None) -> list[Mention]:
    """Every proper-noun mention, plus common nouns (>= 2 characters) repeated concept_min_count times; a title on
    the text's first line (`title_line`) is a mention of its own, whatever the spotters make of its words, and so is
    the document's title (`given_title`), whether or not the text says it."""
    found: list[Mention] = []
    if _CJK.search(text):
        found.extend(_zh_mentions(text, concept_min_count))
    found.extend(_en_mentions(text))
    if (title := title_line(text)) and not any(m.name == title and m.start == text.find(title) for m in found):
        found.append(Mention(title, "TITLE", text.find(title)))
    if (title := given_title(document_title)) and not any(m.name.casefold() == title.casefold() for m in found):
        found.append(Mention(title, "TITLE", 0))
    found.sort(key=lambda m: m.start)
    return found


def _zh_mentions(text: str, concept_min_count: int) -> list[Mention]:
    out, nouns, pos = [], [], 0
    for word, flag in _jieba().cut(text):
        start = pos
        pos += len(word)
        if not _CJK.search(word):
            continue
        if flag in _ZH_TYPES and len(word) >= 2:
            out.append(Mention(word, _ZH_TYPES[flag], start))
        elif flag == "n" and len(word) >= 2 and word not in ZH_GENERIC:
            nouns.append(Mention(word, "CONCEPT", start))
    counts = Counter(m.name for m in nouns)
    out.extend(m for m in nouns if counts[m.name] >= concept_min_count)
    return out


def _en_mentions(text: str) -> list[Mention]:
    out: list[Mention] = []
    opening = _Lazy(lambda: _OpeningWords(text))  # built once per text, and only for a text with a word alone
    for phrase in _EN_PHRASE.finditer(text):
        for start, words in _names_in(phrase):
            if mention := _en_mention(text, start, words, opening):
                out.append(mention)
    return out


def _names_in(phrase: re.Match) -> list[tuple[int, list[str]]]:
    """(offset, words) of each name in a capitalised phrase: split at "and", a possessive's ending dropped."""
    names: list[tuple[int, list[str]]] = []
    current: list[str] = []
    begin = phrase.start()
    for word in re.finditer(r"\S+", phrase.group()):
        if word.group() == "and":
            names.append((begin, current))
            current = []
            continue
        if not current:
            begin = phrase.start() + word.start()
        current.append(word.group())
        if len(word.group()) > 2 and _POSSESSIVE.search(word.group()):
            current[-1] = _POSSESSIVE.sub("", word.group())
            names.append((begin, current))  # what follows a possessive is the thing owned, not more of the name
            current = []
    names.append((begin, current))
    return [(start, words) for start, words in names if words]


def _en_mention(text: str, start: int, words: list[str], opening: _Lazy) -> Mention | None:
    """The mention of the name `words` found at `start`, or None when it is no name."""
    while words and (words[0] in _EN_STOP or words[0] in _EN_JOINERS):
        start += len(words[0]) + 1
        words = words[1:]
    while len(words) > 2 and words[0] in _EN_COMMON and words[1] in _EN_JOINERS:
        start = text.index(words[2], start)
        words = words[2:]  # "Consider the Readline changes", "Support for Unicode": the name is what follows
    while words and words[-1] in _EN_JOINERS:
        words = words[:-1]  # "Lothair of" before a possessive or an "and" that was split off
    if not words:
        return None
    start = text.index(words[0], start)
    name = " ".join(words)
    if len(name) < 2 or name.isupper() and len(name) < 3:
        return None
    if len(words) >= 2 and all(w.isupper() for w in words):
        return None  # an ALL-CAPS phrase is markup or boilerplate ("MAIN CONTENT STARTS HERE"), not a name
    if len(words) == 1 and (name in _CALENDAR or opening.value(name, start)):
        return None
    if any(w.rstrip(".") in _ORG_WORDS for w in words):
        kind = "ORGANIZATION"
    elif _GEO_PREP.search(text[max(0, start - 8) : start]):
        kind = "GEO"
    elif _TITLE_BEFORE.search(text[max(0, start - 12) : start]) or (
        2 <= len(words) <= 3 and all(_NAME_WORD.match(w) for w in words)
    ):
        kind = "PERSON"  # with evidence: a title before it, or a name's shape (two or three capitalised words)
    else:
        kind = "OTHER"
    return Mention(name, kind, start)


class _Lazy:
    def __init__(self, make):
        self._make, self._value = make, None

    @property
    def value(self):
        if self._value is None:
            self._value = self._make()
        return self._value


class _OpeningWords:
    """Which words of one text are capitalised only because they open a sentence or a line: a common word there
    ("Add ...", "Some ..."), one the text also writes in lower case ("Consider ..." / "to consider"), or one that
    opens several lines or list items and never stands inside one (a changelog's "* Regenerate ..."). A name that
    opens two sentences of prose stays a name, and so does a common word inside a sentence ("bought Apple"). The
    text's words are gathered once, and each word is judged once."""

    def __init__(self, text: str):
        self.text = text
        self.words = set(_EN_WORD.findall(text))
        self.judged: dict[str, bool] = {}

    def opens(self, at: int, opening: re.Pattern = _SENTENCE_OPENING) -> bool:
        return opening.search(self.text[max(0, at - 12) : at]) is not None

    def __call__(self, word: str, start: int) -> bool:
        """Whether `word`, alone at `start`, is such a word."""
        if not self.opens(start):
            return False
        if word not in self.judged:
            self.judged[word] = word in _EN_COMMON or word.lower() in self.words or self._opens_lines_only(word)
        return self.judged[word]

    def _opens_lines_only(self, word: str) -> bool:
        text, seen = self.text, 0
        at = text.find(word)
        while at != -1:  # each whole-word occurrence (str.find: a regex per word costs more than the search)
            end = at + len(word)
            if not (at and _in_word(text[at - 1]) or end < len(text) and _in_word(text[end])):
                if not self.opens(at, _LINE_OPENING):
                    return False
                seen += 1
            at = text.find(word, at + 1)
        return seen >= 2


def _in_word(char: str) -> bool:
    return char.isalnum() or char in "_'’&-"
