"""Token counting with tiktoken, offline.

tiktoken downloads its BPE files on first use and fails with no internet. We look for them, in order:
an explicit `encoding_file`, $GRAPHRAG_RAY_TIKTOKEN_DIR, <venv>/share/graphrag-ray/tiktoken (filled by
`graphrag-ray tokenizers install`, which takes them from the litellm wheel on PyPI), ~/.cache/graphrag-ray/
tiktoken, then $TIKTOKEN_CACHE_DIR / tiktoken's own download as a last resort.
Files are stored under tiktoken's cache-key names (sha1 of the download URL), so pointing
TIKTOKEN_CACHE_DIR at the folder is enough for tiktoken itself.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import sys
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


def get_encoding(name: str = DEFAULT_ENCODING, encoding_file: str | None = None):
    return _cached_encoding(name, encoding_file)  # one cache key however it is called (lru_cache keys on the form)


@functools.lru_cache(maxsize=8)
def _cached_encoding(name: str, encoding_file: str | None):
    import tiktoken

    if encoding_file:
        _adopt_file(name, Path(encoding_file))
    if name in ENCODING_URLS:
        for folder in search_dirs():
            if (folder / cache_key(name)).exists():
                os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)  # for tiktoken.get_encoding calls elsewhere too
                return load_encoding_file(name, folder / cache_key(name))
    try:
        return tiktoken.get_encoding(name)
    except Exception as exc:  # offline download failure, unknown name
        raise ConfigError(
            f"tokenizer '{name}': encoding file not available offline ({type(exc).__name__}); run "
            "`graphrag-ray tokenizers install` or set encoding_file / GRAPHRAG_RAY_TIKTOKEN_DIR") from None


def load_encoding_file(name: str, source: Path):
    """The encoding `name` from its BPE file `source` (named by its cache key).

    tiktoken parses its base64 BPE file on every load (~0.14 s for o200k_base); the parsed constructor
    arguments are kept beside it in marshal form (~0.04 s to read), keyed by the file's size and mtime and by
    this Python's version (marshal's format is version-specific). A folder we cannot write to just costs the parse."""
    import marshal

    import tiktoken
    from tiktoken_ext.openai_public import ENCODING_CONSTRUCTORS

    stat = source.stat()
    stamp = (stat.st_size, stat.st_mtime_ns)
    parsed = source.with_name(f"{source.name}.py{sys.version_info[0]}{sys.version_info[1]}.marshal")
    try:
        cached_stamp, kwargs = marshal.loads(parsed.read_bytes())
        if tuple(cached_stamp) == stamp:
            return tiktoken.Encoding(**kwargs)
    except (OSError, ValueError, EOFError, TypeError):
        pass
    os.environ["TIKTOKEN_CACHE_DIR"] = str(source.parent)  # where tiktoken's constructor finds it by cache key
    kwargs = ENCODING_CONSTRUCTORS[name]()
    try:
        tmp = parsed.with_name(f".{parsed.name}.{os.getpid()}.tmp")
        tmp.write_bytes(marshal.dumps((stamp, kwargs)))
        os.replace(tmp, parsed)
    except OSError:
        pass
    return tiktoken.Encoding(**kwargs)


def _adopt_file(name: str, path: Path) -> None:
    """Copy a user-supplied .tiktoken file under its cache-key name into the user cache folder."""
    if name not in ENCODING_URLS:
        raise ConfigError(f"encoding_file: only {', '.join(ENCODING_URLS)} can be loaded from a file")
    if not path.exists():
        raise ConfigError(f"encoding_file: {path} does not exist")
    target_dir = Path.home() / ".cache" / "graphrag-ray" / "tiktoken"
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / cache_key(name)
    if not target.exists():
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(path, tmp)
        os.replace(tmp, target)
    os.environ["GRAPHRAG_RAY_TIKTOKEN_DIR"] = str(target_dir)


class Tokenizer:
    """Counts, encodes and decodes with one tiktoken encoding."""

    def __init__(self, encoding: str = DEFAULT_ENCODING, encoding_file: str | None = None):
        self.name = encoding
        self._enc = get_encoding(encoding, encoding_file)

    def encode(self, text: str) -> list[int]:
        return self._enc.encode(text, disallowed_special=())

    def decode(self, tokens: list[int]) -> str:
        return self._enc.decode(tokens)

    def count(self, text: str) -> int:
        return len(self._enc.encode(text, disallowed_special=()))

    def count_messages(self, messages: list[dict]) -> int:
        return count_chat_tokens(self, messages)


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
