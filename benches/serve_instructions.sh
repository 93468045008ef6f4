#!/usr/bin/env bash
# `serve`'s instructions per request, counted by callgrind (repeatable on a shared machine, where
# times are not): starts `serve --config examples/serve.yaml` under `valgrind --tool=callgrind`,
# then for /tasks/admit, /pods/mutate (twice: examples/load/pod.json, and pod-tolerated.json,
# the same pod with the two tolerations the API server's DefaultTolerationSeconds plugin, on by
# default, adds before a mutating webhook sees a pod)
# and /jobs/validate (1,000 queues in its cache, from benches/apiserver.py) sends 50 requests
# to warm up, zeroes the counters, sends
# REQUESTS more over one kept-alive HTTP/1.1 TLS connection (curl), dumps the counters and prints
# the instructions per request. The counts include TLS, hyper and the runtime, all the server's
# threads.
#
#   benches/serve_instructions.sh                 # 1,000 requests per path
#   REQUESTS=5000 SERVE_BIN=target/old/release/dexaflow-admission BUILD=0 benches/serve_instructions.sh
#
# Needs valgrind, curl and the certificate benches/serve_vs_bare.sh makes in target/serve-tls/;
# run from anywhere in the repository.
set -euo pipefail

REQUESTS=${REQUESTS:-1000}
QUEUES=1000
BUILD=${BUILD:-1}

cd "$(git rev-parse --show-toplevel)"
command -v valgrind >/dev/null || { echo "serve_instructions: valgrind is not installed" >&2; exit 2; }
[ -s target/serve-tls/ca.crt ] || { echo "serve_instructions: run benches/serve_vs_bare.sh once to make target/serve-tls/" >&2; exit 2; }
if [ "$BUILD" = 1 ]; then
  cargo build --release --bin dexaflow-admission
fi
serve_bin=${SERVE_BIN:-${CARGO_TARGET_DIR:-target}/release/dexaflow-admission}

work=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  [ -n "${api_pid:-}" ] && kill "$api_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port=$(free_port)
probe_port=$(free_port)
# The cluster /jobs/validate reads: QUEUES open leaf queues, listed once and watched.
source benches/stand_in_cluster.sh
DEXAFLOW_SERVER_LISTEN=127.0.0.1:$port DEXAFLOW_SERVER_PROBE_LISTEN=127.0.0.1:$probe_port \
  DEXAFLOW_METRICS_LISTEN=127.0.0.1:0 DEXAFLOW_SERVER_KUBECONFIG="$work/kubeconfig" \
  DEXAFLOW_SERVER_ENABLED_ADMISSION=/tasks/admit,/pods/mutate,/jobs/validate \
  valgrind --tool=callgrind --callgrind-out-file="$work/cg" "$serve_bin" serve \
  --config examples/serve.yaml >"$work/serve.out" 2>"$work/serve.err" &
pid=$!
# Ready once listening and the queue cache has synced.
for _ in $(seq 600); do
  curl -sf "http://127.0.0.1:$probe_port/readyz" >/dev/null && break
  sleep 0.2
done
curl -sf "http://127.0.0.1:$probe_port/readyz" >/dev/null || { echo "serve did not get ready:" >&2; cat "$work/serve.err" >&2; exit 2; }

send() { # path body-file count: one curl, one connection, the URL globbed into count requests
  curl -s -o /dev/null --cacert target/serve-tls/ca.crt -H 'content-type: application/json' \
    --data-binary "@examples/load/$2" "https://127.0.0.1:$port$1#[1-$3]" >/dev/null
}

echo "serve under callgrind, $REQUESTS requests per path after 50 to warm up"
dump=0
for pair in "/tasks/admit admit.json" "/pods/mutate pod.json" "/pods/mutate pod-tolerated.json" \
  "/jobs/validate job.json"; do
  read -r path body <<<"$pair"
  send "$path" "$body" 50
  callgrind_control -z "$pid" >/dev/null 2>&1
  send "$path" "$body" "$REQUESTS"
  callgrind_control -d "$pid" >/dev/null 2>&1
  dump=$((dump + 1))
  total=$(awk '/^(totals|summary):/ { print $2; exit }' "$work/cg.$dump")
  printf '%-14s %-20s %12d instructions per request\n' "$path" "$body" $((total / REQUESTS))
done
