"""Token counting with tiktoken, offline.

tiktoken downloads its BPE files on first use and fails with no internet. We look for them, in order:
an explicit `encoding_file`, $GRAPHRAG_RAY_TIKTOKEN_DIR, <venv>/share/graphrag-ray/tiktoken (filled by
`graphrag-ray tokenizers install`, which takes them from the litellm wheel on PyPI), ~/.cache/graphrag-ray/
tiktoken, then $TIKTOKEN_CACHE_DIR / tiktoken's own download as a last resort. Files are stored under tiktoken's
cache-key names (sha1 of the download URL), so pointing TIKTOKEN_CACHE_DIR at the folder also serves tiktoken
itself; we never set it: the encoding is built here from the file.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from graphrag_ray.errors import ConfigError

ENCODING_URLS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}
DEFAULT_ENCODING = "cl100k_base"


def cache_key(encoding: str) -> str:
    return hashlib.sha1(ENCODING_URLS[encoding].encode()).hexdigest()


def search_dirs() -> list[Path]:
    dirs = []
    if os.environ.get("GRAPHRAG_RAY_TIKTOKEN_DIR"):
        dirs.append(Path(os.environ["GRAPHRAG_RAY_TIKTOKEN_DIR"]))
    dirs.append(Path(sys.prefix) / "share" / "graphrag-ray" / "tiktoken")
    dirs.append(Path.home() / ".cache" / "graphrag-ray" / "tiktoken")
    if os.environ.get("TIKTOKEN_CACHE_DIR"):
        dirs.append(Path(os.environ["TIKTOKEN_CACHE_DIR"]))
    return dirs


def encoding_for_model(model: str) -> str:
    """o200k_base for the gpt-4o / o-series / gpt-4.1+ / gpt-5 family, cl100k_base otherwise."""
    name = model.lower().rsplit("/", 1)[-1]
    if name.startswith(("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")):
        return "o200k_base"
    return DEFAULT_ENCODING


# What tiktoken's constructors (tiktoken_ext.openai_public) give each encoding besides its BPE ranks: with these we
# build an Encoding from a local file ourselves, instead of pointing tiktoken's download cache (an environment
# variable) at our folder. A test checks them against tiktoken's own constructors.
ENCODING_SPECS = {
    "cl100k_base": {
        "sha256": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        "pat_str": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
        "special_tokens": {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    },
    "o200k_base": {
        "sha256": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        "pat_str": "|".join(
            [
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        ),
        "special_tokens": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    },
}


_LOADING = threading.Lock()  # two threads asking for an encoding first build it once


def get_encoding(name: str = DEFAULT_ENCODING, encoding_file: str | None = None):
    with _LOADING:
        return _cached_encoding(name, encoding_file)  # one cache key however called (lru_cache keys on the form)


def load_in_background(model: str, encoding: str | None = None) -> None:
    """Build a model's tokenizer in a thread: tiktoken builds it without holding the GIL, so the third of a
    second it takes passes while a query loads its tables. A failure shows when the tokenizer is asked for."""

    def load() -> None:
        try:
            tokenizer_for(model, encoding)
        except Exception:  # noqa: BLE001 - said again, in full, by the caller's own first use
            pass

    threading.Thread(target=load, name="graphrag-ray-tokenizer", daemon=True).start()


@functools.lru_cache(maxsize=8)
def _cached_encoding(name: str, encoding_file: str | None):
    if encoding_file:
        if name not in ENCODING_SPECS:
            raise ConfigError(f"encoding_file: only {', '.join(ENCODING_SPECS)} can be loaded from a file")
        if not Path(encoding_file).exists():
            raise ConfigError(f"encoding_file: {encoding_file} does not exist")
        return load_encoding_file(name, Path(encoding_file))
    if name in ENCODING_SPECS:
        for folder in search_dirs():
            if (folder / cache_key(name)).exists():
                return load_encoding_file(name, folder / cache_key(name))
    import tiktoken

    try:
        return tiktoken.get_encoding(name)
    except Exception as exc:  # offline download failure, unknown name
        raise ConfigError(
            f"tokenizer '{name}': encoding file not available offline ({type(exc).__name__}); run "
            "`graphrag-ray tokenizers install` or set encoding_file / GRAPHRAG_RAY_TIKTOKEN_DIR"
        ) from None


def load_encoding_file(name: str, source: Path):
    """The encoding `name` from its BPE file `source`.

    tiktoken parses the base64 BPE file on every load; the parsed ranks are kept beside it in marshal form
    (several times faster to read), keyed by the file's size and mtime and by this Python's version (marshal's
    format is version-specific). A folder we cannot write to just costs the parse."""
    import marshal

    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    spec = ENCODING_SPECS[name]
    stat = source.stat()
    stamp = (stat.st_size, stat.st_mtime_ns)
    parsed = source.with_name(f"{source.name}.ranks-py{sys.version_info[0]}{sys.version_info[1]}.marshal")
    ranks = None
    try:
        cached_stamp, ranks = marshal.loads(parsed.read_bytes())
        if tuple(cached_stamp) != stamp or not isinstance(ranks, dict):
            ranks = None
    except (OSError, ValueError, EOFError, TypeError):
        ranks = None
    if ranks is None:
        try:
            ranks = load_tiktoken_bpe(str(source), expected_hash=spec["sha256"])
        except ValueError as exc:
            raise ConfigError(f"tokenizer file {source} is not {name}'s ({exc})") from None
        try:
            tmp = parsed.with_name(f".{parsed.name}.{os.getpid()}.tmp")
            tmp.write_bytes(marshal.dumps((stamp, ranks)))
            os.replace(tmp, parsed)
        except OSError:
            pass
    return tiktoken.Encoding(
        name=name, pat_str=spec["pat_str"], mergeable_ranks=ranks, special_tokens=spec["special_tokens"]
    )


class Tokenizer:
    """Counts, encodes and decodes with one tiktoken encoding."""

    def __init__(self, encoding: str = DEFAULT_ENCODING, encoding_file: str | None = None):
        self.name = encoding
        self._enc = get_encoding(encoding, encoding_file)
        self._repeated: dict[str, int] = {}

    def encode(self, text: str) -> list[int]:
        return self._enc.encode(text, disallowed_special=())

    def decode(self, tokens: list[int]) -> str:
        return self._enc.decode(tokens)

    def count(self, text: str) -> int:
        return len(self._enc.encode(text, disallowed_special=()))

    def count_repeated(self, text: str) -> int:
        """count(text), remembered: a prompt template is counted for every item of a step, not encoded each time."""
        if (known := self._repeated.get(text)) is None:
            if len(self._repeated) >= 64:
                self._repeated.clear()
            known = self._repeated[text] = self.count(text)
        return known

    def count_messages(self, messages: list[dict]) -> int:
        return count_chat_tokens(self, messages)


def at_most_tokens(text: str) -> int:
    """An upper bound of any tokenizer's count, without encoding: its UTF-8 bytes (a BPE token is at least one
    byte). Deciding that something fits rarely needs the exact count."""
    return len(text.encode("utf-8"))


def fits(text: str, limit: int, count: Callable[[str], int]) -> bool:
    """count(text) <= limit, counted only when the byte bound cannot tell."""
    return at_most_tokens(text) <= limit or count(text) <= limit


def count_chat_tokens(tokenizer: Tokenizer, messages: list[dict]) -> int:
    """OpenAI's accounting for chat prompts: 3 tokens per message + role/content, +3 for the reply primer.

    The simulator counts with this same function, so client-side reservations match what it charges.
    """
    total = 3
    for message in messages:
        total += 3 + tokenizer.count(str(message.get("content") or "")) + 1
    return total


@functools.lru_cache(maxsize=8)
def tokenizer_for(model: str, encoding: str | None = None, encoding_file: str | None = None) -> Tokenizer:
    return Tokenizer(encoding or encoding_for_model(model), encoding_file)
