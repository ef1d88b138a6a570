#!/usr/bin/env bash
# The main job end to end with no API key and no network: index the coffee-shop corpus with the offline
# `fast` method, then ask a local and a global question. Run `bash scripts/setup.sh` once first.
set -euo pipefail
cd "$(dirname "$0")/.."
GR=${GR:-.venv/bin/graphrag-ray}
ROOT=${1:-examples/coffee_shop}
"$GR" index --root "$ROOT" --method fast
echo
echo '$ graphrag-ray query --method local "李明在经营咖啡店过程中都经历了哪些挑战？"'
"$GR" query --root "$ROOT" --method local "李明在经营咖啡店过程中都经历了哪些挑战？"
echo
echo '$ graphrag-ray query --method global "这家咖啡店的主要经营主题是什么？"'
"$GR" query --root "$ROOT" --method global "这家咖啡店的主要经营主题是什么？"
