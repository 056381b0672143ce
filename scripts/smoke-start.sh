#!/usr/bin/env bash
# CI: start the service the README's way (`npm start`: compiled code, embedded database, demo data) on a
# free port, wait until it is ready, ask it for a trust document and a checkpoint, stop it with SIGTERM
# and require a clean exit. Prints the Node version it ran on.
set -euo pipefail
cd "$(dirname "$0")/.."
data="$(mktemp -d)"
port="${PV_SMOKE_PORT:-18080}"
log="$data/server.log"
PORT="$port" PV_DATA_DIR="$data/pv-data" npm start >"$log" 2>&1 &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; rm -rf "$data"; }
trap cleanup EXIT
for _ in $(seq 1 120); do
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { cat "$log"; echo "smoke: the service exited before it was ready" >&2; exit 1; }
  sleep 0.5
done
curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null || { cat "$log"; echo "smoke: not ready after 60 s" >&2; exit 1; }
curl -fsS "http://127.0.0.1:$port/log/checkpoint" | head -1
curl -fsS -o /dev/null -w "smoke: GET / → %{http_code}\n" "http://127.0.0.1:$port/"
# The page's verifier exists only as the bundle `npm run build` writes into dist.
curl -fsS -o /dev/null -w "smoke: GET /web/verify.js → %{http_code} (%{size_download} bytes)\n" "http://127.0.0.1:$port/web/verify.js"
# npm start → node: signal the node process itself (npm does not forward signals to its child everywhere).
node_pid="$(pgrep -n -f 'dist/src/main.js')"
kill -TERM "$node_pid"
status=0; wait "$pid" || status=$?
echo "smoke: npm start on $(npm exec -- node --version 2>/dev/null) answered and stopped with status $status"
[ "$status" = "0" ] || { cat "$log"; exit 1; }
