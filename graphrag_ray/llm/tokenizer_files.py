"""`graphrag-ray tokenizers install`: put tiktoken's BPE files where tokens.py finds them, offline after.

The litellm wheel on PyPI carries cl100k_base and o200k_base under their tiktoken cache-key names, so
the files come from the package registry (reachable from CI and most build hosts) rather than from
tiktoken's own download host. An air-gapped cluster copies the folder (or bakes it into its image).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from graphrag_ray.errors import GraphRagRayError
from graphrag_ray.llm.tokens import ENCODING_SPECS, ENCODING_URLS, cache_key, load_encoding_file

LITELLM_SPEC = "litellm==1.110.2"
WHEEL_DIR = "litellm/litellm_core_utils/tokenizers/"


def default_dest() -> Path:
    return Path(sys.prefix) / "share" / "graphrag-ray" / "tiktoken"


def install(dest: Path | None = None, wheel: Path | None = None) -> list[Path]:
    dest = dest or default_dest()
    dest.mkdir(parents=True, exist_ok=True)
    wanted = {cache_key(name): name for name in ENCODING_URLS}
    if not all((dest / key).exists() for key in wanted):
        _extract(dest, wanted, wheel)
    for key, name in wanted.items():  # the parsed form beside each file: every later process loads it faster
        load_encoding_file(name, dest / key)
    return [dest / key for key in wanted]


def _extract(dest: Path, wanted: dict[str, str], wheel: Path | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        if wheel is None:
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "-q",
                "-d",
                tmp,
                LITELLM_SPEC,
            ]
            done = subprocess.run(cmd, capture_output=True, text=True)
            wheels = list(Path(tmp).glob("litellm-*.whl"))
            if done.returncode != 0 or not wheels:
                raise GraphRagRayError(
                    f"could not download {LITELLM_SPEC} to get tokenizer files: "
                    f"{(done.stderr or '').strip().splitlines()[-1:]}"
                )
            wheel = wheels[0]
        with zipfile.ZipFile(wheel) as zf:
            for key, name in wanted.items():
                data = zf.read(WHEEL_DIR + key)
                if hashlib.sha256(data).hexdigest() != ENCODING_SPECS[name]["sha256"]:
                    raise GraphRagRayError(f"tokenizer file {name} in {wheel.name} has an unexpected hash")
                tmp_file = dest / f".{key}.tmp"
                tmp_file.write_bytes(data)
                tmp_file.replace(dest / key)
