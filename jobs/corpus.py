"""Benchmark corpora: real English text found on the machine, cut into documents, up to a token budget - Debian
package docs and changelogs and the licences first (what the 1M and 10M figures were measured on), then man pages
(their troff requests and font escapes taken out), the Python standard library's sources and vim's help: about
100M tokens on a Debian machine with Python and vim. Generated prose fills the rest only when that runs out."""

from __future__ import annotations

import gzip
import re
import sys
from pathlib import Path

from graphrag_ray.llm.tokens import Tokenizer

DOC_ROOTS = [
    (Path("/usr/share/doc"), "*"),
    (Path("/usr/share/common-licenses"), "*"),
    (Path("/usr/share/man"), "*"),
    (Path(f"/usr/lib/python{sys.version_info.major}.{sys.version_info.minor}"), "*.py"),
    (Path("/usr/share/vim"), "*.txt"),
]
# vim's help alone: a corpus with real hubs (VIM is in most of its text units) for update benchmarks
CORPORA = {"docs": DOC_ROOTS, "vim": [(Path("/usr/share/vim"), "*.txt")]}
_TROFF = re.compile(r"^\.[A-Za-z\\\"].*$|\\f[BIRP]|\\\(..", re.M)  # man pages' requests and escapes


def _texts(roots=DOC_ROOTS):
    for root, pattern in roots:
        if not root.exists():
            continue
        for path in sorted(root.rglob(pattern)):
            if not path.is_file() or path.is_symlink():
                continue
            try:
                raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
                text = raw.decode("utf-8")
            except (OSError, UnicodeDecodeError, gzip.BadGzipFile, EOFError):
                continue
            if root.name == "man":
                text = _TROFF.sub("", text).replace("\\-", "-")
            text = re.sub(r"[ \t]+", " ", text).strip()
            if len(text) > 400 and "\x00" not in text:
                yield path, text


def build_corpus(
    folder: Path, target_tokens: int, doc_tokens: int = 3000, corpus: str = "docs", sample_of: int | None = None
) -> int:
    """Write .txt documents of about `doc_tokens` each into `folder` until `target_tokens`; return the total.
    With `sample_of` (a larger size), the documents are an evenly spread sample of that size's corpus: the same
    mix of sources at every size, so a scaling run compares the engine, not the text (the sources come in order,
    and man pages and Python sources name more per token than the Debian docs the smaller sizes would hold)."""
    folder.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer("cl100k_base")
    total, n, seen = 0, 0, 0
    ratio = target_tokens / sample_of if sample_of and sample_of > target_tokens else 1.0
    for _, text in _texts(CORPORA[corpus]):
        tokens = tok.encode(text)
        for start in range(0, len(tokens), doc_tokens):
            seen += 1
            if int(seen * ratio) == int((seen - 1) * ratio):  # not one of the sample's pieces
                continue
            piece = tok.decode(tokens[start : start + doc_tokens])
            (folder / f"doc{n:05d}.txt").write_text(piece, encoding="utf-8")
            total += min(doc_tokens, len(tokens) - start)
            n += 1
            if total >= target_tokens:
                return total
    while total < target_tokens:  # not enough text here: generated prose fills the rest
        words = " ".join(
            f"Company{n % 97} hired Person{(n * 7) % 211} in City{n % 31} during project {n}." for _ in range(120)
        )
        (folder / f"gen{n:05d}.txt").write_text(words, encoding="utf-8")
        total += tok.count(words)
        n += 1
    return total


def fresh_project(
    workdir: Path | None,
    tokens: int,
    prefix: str,
    separate_process: bool = False,
    corpus: str = "docs",
    sample_of: int | None = None,
) -> tuple[Path, int]:
    """An empty project under `workdir` (a new temp folder if None) whose input is a ~`tokens` corpus (`corpus`:
    a CORPORA name; `sample_of`: build_corpus's). With `separate_process` the corpus is made in a child process,
    so that what making it took stays out of this process's memory figures."""
    import shutil
    import subprocess
    import sys
    import tempfile

    work = workdir or Path(tempfile.mkdtemp(prefix=prefix))
    shutil.rmtree(work / "project", ignore_errors=True)
    root = work / "project"
    if separate_process:
        made = subprocess.run(
            [sys.executable, __file__, str(root / "input"), str(tokens), corpus, str(sample_of or 0)],
            check=True,
            capture_output=True,
            text=True,
        )
        return root, int(made.stdout.split()[-1])
    return root, build_corpus(root / "input", tokens, corpus=corpus, sample_of=sample_of)


if __name__ == "__main__":
    import sys

    corpus = sys.argv[3] if len(sys.argv) > 3 else "docs"
    sample_of = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    print(build_corpus(Path(sys.argv[1]), int(sys.argv[2]), corpus=corpus, sample_of=sample_of or None))
