#!/usr/bin/env bash
# The main job end to end with no API key and no network: index an example corpus with the offline `fast`
# method, then ask its local and its global question (ROOT/questions.txt: line 1 local, line 2 global).
# Run `bash scripts/setup.sh` once first.   bash examples/quickstart.sh [examples/coffee_shop | examples/english]
set -euo pipefail
cd "$(dirname "$0")/.."
GR=${GR:-.venv/bin/graphrag-ray}
ROOT=${1:-examples/coffee_shop}
LOCAL=$(sed -n 1p "$ROOT/questions.txt")
GLOBAL=$(sed -n 2p "$ROOT/questions.txt")
"$GR" index --root "$ROOT" --method fast
echo
echo "\$ graphrag-ray query --method local \"$LOCAL\""
"$GR" query --root "$ROOT" --method local "$LOCAL"
echo
echo "\$ graphrag-ray query --method global \"$GLOBAL\""
"$GR" query --root "$ROOT" --method global "$GLOBAL"
