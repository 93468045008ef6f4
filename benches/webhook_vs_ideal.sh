#!/usr/bin/env bash
# The webhook client against the ideal, in one run: `loadtest` with 64 workers through
#   - `sleep:5ms`, a hook that answers after exactly 5 ms (the ideal: 64 / 5 ms = 12,800/s),
#   - `webhook:URL` to examples/webhook_server with `--delay 5ms` over HTTP/2,
#   - the same over HTTP/1.1 (a second server started with `--http1-only`),
# ROUNDS times in turn, and prints each run's attempts per second, the medians and each
# webhook's median as a share of the ideal's.
#
#   benches/webhook_vs_ideal.sh                   # 3 rounds of 20,000 attempts
#   ROUNDS=5 ATTEMPTS=30000 WORKERS=64 benches/webhook_vs_ideal.sh
#   LOADTEST_BIN=target/old/release/dexaflow-admission BUILD=0 benches/webhook_vs_ideal.sh
#
# Run from anywhere in the repository.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
ATTEMPTS=${ATTEMPTS:-20000}
WORKERS=${WORKERS:-64}
DELAY=${DELAY:-5ms}
BUILD=${BUILD:-1}

cd "$(git rev-parse --show-toplevel)"
if [ "$BUILD" = 1 ]; then
  cargo build --release --bin dexaflow-admission --example webhook_server
fi
bin=${CARGO_TARGET_DIR:-target}/release
# The binary whose load test (and so whose webhook client) runs: another build's, to compare.
loadtest=${LOADTEST_BIN:-$bin/dexaflow-admission}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

h2_port=$(free_port)
h1_port=$(free_port)
"$bin/examples/webhook_server" --listen "127.0.0.1:$h2_port" --delay "$DELAY" \
  --ca-out "$work/h2.pem" 2>"$work/h2.err" &
pids+=($!)
"$bin/examples/webhook_server" --listen "127.0.0.1:$h1_port" --delay "$DELAY" --http1-only \
  --ca-out "$work/h1.pem" 2>"$work/h1.err" &
pids+=($!)
for _ in $(seq 100); do
  grep -q https "$work/h2.err" 2>/dev/null && grep -q https "$work/h1.err" 2>/dev/null && break
  sleep 0.1
done

# name -> the loadtest flags of that hook
declare -A hooks=(
  [ideal]="--hook sleep:$DELAY"
  [http2]="--hook webhook:https://127.0.0.1:$h2_port/tasks/admit --webhook-ca-bundle $work/h2.pem"
  [http1]="--hook webhook:https://127.0.0.1:$h1_port/tasks/admit --webhook-ca-bundle $work/h1.pem"
)
names=(ideal http2 http1)

run() { # name -> attempts per second (0 when an attempt was not executed)
  local out
  # shellcheck disable=SC2086
  out=$("$loadtest" loadtest ${hooks[$1]} --buffer-size 256 --workers "$WORKERS" \
    --attempts "$ATTEMPTS" --output json 2>/dev/null)
  python3 -c '
import json, sys
report = json.loads(sys.stdin.read())
executed = report["outcomes"]["executed"]["count"]
print(report["attempts_per_second"] if executed == report["offered"] else 0)' <<<"$out"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "loadtest --buffer-size 256 --workers $WORKERS --attempts $ATTEMPTS, hooks answering after $DELAY, $ROUNDS rounds; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
  line="round $round"
  for name in "${names[@]}"; do
    rate=$(run "$name")
    echo "$name $rate" >>"$work/rates"
    line+=$(printf '  %s %8.0f/s' "$name" "$rate")
  done
  echo "$line"
done
ideal=$(awk '$1 == "ideal" { print $2 }' "$work/rates" | median)
echo
for name in "${names[@]}"; do
  m=$(awk -v n="$name" '$1 == n { print $2 }' "$work/rates" | median)
  printf '%-6s median %8.0f/s  %5.1f%% of the ideal\n' "$name" "$m" \
    "$(awk -v m="$m" -v i="$ideal" 'BEGIN { print (i > 0) ? 100 * m / i : 0 }')"
done
