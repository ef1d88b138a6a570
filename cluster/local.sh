#!/usr/bin/env bash
# A head and a second node on this one machine, for trying cluster jobs out:
#   bash cluster/local.sh          start   (prints the address and how to submit)
#   bash cluster/local.sh stop     stop both nodes
set -euo pipefail
cd "$(dirname "$0")/.."
RAY=${RAY:-.venv/bin/ray}
# Ray 2.60 local clusters use token authentication: every node (and every client) must present the token.
export RAY_AUTH_MODE=token
[ -f "$HOME/.ray/auth_token" ] || "$RAY" get-auth-token --generate >/dev/null
if [ "${1:-start}" = "stop" ]; then
  "$RAY" stop --force >/dev/null 2>&1 || true
  exit 0
fi
"$RAY" stop --force >/dev/null 2>&1 || true
"$RAY" start --head --port=6379 --num-cpus=1 --dashboard-port=8265 --include-dashboard=true \
  --temp-dir=/tmp/ray-head --disable-usage-stats >/dev/null
# a second raylet on the same host: its own ports and temp dir, joined to the head
"$RAY" start --address=127.0.0.1:6379 --num-cpus=1 --node-manager-port=6380 --object-manager-port=6381 \
  --min-worker-port=11000 --max-worker-port=11999 --dashboard-agent-listen-port=52466 \
  --dashboard-agent-grpc-port=52467 --metrics-export-port=52468 --runtime-env-agent-port=52469 \
  --disable-usage-stats >/dev/null
# the job agent needs a moment after start-up
for _ in $(seq 1 30); do
  curl -sf http://127.0.0.1:8265/api/version >/dev/null 2>&1 && break
  sleep 1
done
"$RAY" status --address=127.0.0.1:6379 | sed -n '1,12p'
echo "submit (token auth: RAY_AUTH_MODE=token, token in ~/.ray/auth_token):"
echo "  RAY_AUTH_MODE=token RAY_ADDRESS=http://127.0.0.1:8265 $RAY job submit --working-dir . --runtime-env cluster/runtime_env.yaml -- python jobs/index.py --root \$PWD/examples/coffee_shop --method fast"
