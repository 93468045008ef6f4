#!/usr/bin/env bash
# `serve` against a bare hyper server on the same TLS, in one run: builds release, makes a
# certificate when target/serve-tls/ has none, starts `serve` (examples/serve.yaml) and
# examples/fixed_tls_server on free loopback ports, then for ROUNDS rounds runs wrk on each
# path, serve then the bare server back to back, and prints each round's requests per second
# and each server's own CPU time per request, the medians and the ratios of the medians (the
# CPU ratio is the steadier of the two on a machine that other work shares). Then p99 at RATE requests/s (examples/rate_client,
# open loop) on each path and the bare server, once each, unless RATE=0. `/jobs/validate` reads a
# queue cache of QUEUES queues (1000 by default) that `serve` lists and watches from
# benches/apiserver.py, a stand-in API server on loopback.
#
#   benches/serve_vs_bare.sh                      # 3 rounds of 10 s, 64 connections, 2 threads
#   ROUNDS=5 DURATION=15s CONNECTIONS=64 THREADS=2 RATE=1000 RATE_DURATION=15s benches/serve_vs_bare.sh
#   SERVE_BIN=target/old/release/dexaflow-admission BUILD=0 benches/serve_vs_bare.sh
#   SERVER_THREADS=1 benches/serve_vs_bare.sh     # each server on one runtime thread
#
# SERVER_THREADS sets both servers' runtime threads alike (server.worker_threads for `serve`,
# TOKIO_WORKER_THREADS for the bare server); unset, each takes one per core.
#
# Needs wrk (Debian's package `wrk`), openssl, curl and python3; run from anywhere in the repository.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-64}
THREADS=${THREADS:-2}
RATE=${RATE:-1000}
RATE_DURATION=${RATE_DURATION:-15s}
BUILD=${BUILD:-1}
SERVER_THREADS=${SERVER_THREADS:-}
QUEUES=${QUEUES:-1000}

cd "$(git rev-parse --show-toplevel)"
command -v wrk >/dev/null || { echo "serve_vs_bare: wrk is not installed (apt-get install wrk)" >&2; exit 2; }
if [ "$BUILD" = 1 ]; then
  cargo build --release --bin dexaflow-admission --example fixed_tls_server --example rate_client
fi
target=${CARGO_TARGET_DIR:-target}
bin=$target/release
# The `serve` measured: another build's binary, to compare two commits beside the same baseline.
serve_bin=${SERVE_BIN:-$bin/dexaflow-admission}

tls=target/serve-tls
if [ ! -s "$tls/tls.crt" ]; then
  mkdir -p "$tls"
  (
    cd "$tls"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
      -subj /CN=serve-ca -keyout ca.key -out ca.crt 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
      -keyout tls.key -out tls.csr 2>/dev/null
    openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
      -out tls.crt -extfile <(printf 'subjectAltName=DNS:localhost,IP:127.0.0.1') 2>/dev/null
  )
fi

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

serve_port=$(free_port)
bare_port=$(free_port)
probe_port=$(free_port)
# The cluster /jobs/validate reads: QUEUES open leaf queues, listed once and watched.
source benches/stand_in_cluster.sh
pids+=("$api_pid")
DEXAFLOW_SERVER_LISTEN=127.0.0.1:$serve_port DEXAFLOW_SERVER_PROBE_LISTEN=127.0.0.1:$probe_port \
  DEXAFLOW_METRICS_LISTEN=127.0.0.1:0 DEXAFLOW_SERVER_KUBECONFIG="$work/kubeconfig" \
  DEXAFLOW_SERVER_ENABLED_ADMISSION=/tasks/admit,/pods/mutate,/dags/validate,/jobs/validate \
  ${SERVER_THREADS:+env DEXAFLOW_SERVER_WORKER_THREADS=$SERVER_THREADS} \
  "$serve_bin" serve --config examples/serve.yaml >"$work/serve.out" 2>"$work/serve.err" &
pids+=($!)
serve_pid=$!
${SERVER_THREADS:+env TOKIO_WORKER_THREADS=$SERVER_THREADS} \
  "$bin/examples/fixed_tls_server" --listen "127.0.0.1:$bare_port" --cert "$tls/tls.crt" --key "$tls/tls.key" >"$work/bare.out" 2>&1 &
pids+=($!)
bare_pid=$!
for _ in $(seq 100); do
  grep -q serving "$work/serve.out" 2>/dev/null && grep -q serving "$work/bare.out" 2>/dev/null && break
  sleep 0.1
done
grep -q serving "$work/serve.out" || { echo "serve did not start:" >&2; cat "$work/serve.err" >&2; exit 2; }
grep -q serving "$work/bare.out" || { echo "fixed_tls_server did not start:" >&2; cat "$work/bare.out" >&2; exit 2; }
# Ready once the queue cache has synced with the API server.
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$probe_port/readyz" >/dev/null && break
  sleep 0.1
done
curl -sf "http://127.0.0.1:$probe_port/readyz" >/dev/null || { echo "serve did not get ready:" >&2; cat "$work/serve.err" >&2; exit 2; }

# path body-file: the label, the serve URL's path, and the body both servers are sent.
paths=(
  "/tasks/admit examples/load/admit.json"
  "/pods/mutate examples/load/pod.json"
  "/dags/validate examples/load/dag.json"
  "/jobs/validate examples/load/job.json"
)

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

rps() { # url body pid -> "requests/s CPU-µs-per-request" (the server's own CPU time per request,
  # which other work on the machine disturbs less than the rate); "0 0" when wrk saw errors
  local out before after
  before=$(cpu_ticks "$3")
  out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" -s examples/wrk_post.lua "$1" -- "$2")
  after=$(cpu_ticks "$3")
  if grep -q "Non-2xx" <<<"$out"; then
    echo "serve_vs_bare: non-2xx answers from $1:" >&2
    echo "$out" >&2
    echo "0 0"
    return
  fi
  awk -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" '
    / requests in / { requests = $1 }
    /^Requests\/sec:/ { rate = $2 }
    END { printf "%s %.2f\n", rate, (requests > 0) ? 1e6 * ticks / hz / requests : 0 }' <<<"$out"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "wrk -t$THREADS -c$CONNECTIONS -d$DURATION, $ROUNDS rounds, serve then bare in each; $(nproc) cores, server threads ${SERVER_THREADS:-one per core}, load $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
  for entry in "${paths[@]}"; do
    read -r path body <<<"$entry"
    read -r s sc < <(rps "https://localhost:$serve_port$path" "$body" "$serve_pid")
    read -r b bc < <(rps "https://localhost:$bare_port$path" "$body" "$bare_pid")
    echo "$path $s $b $sc $bc" >>"$work/rps"
    printf 'round %d  %-15s serve %8.0f/s %6.1f µs CPU  bare %8.0f/s %6.1f µs CPU  ratio %.2f (CPU %.2f)\n' \
      "$round" "$path" "$s" "$sc" "$b" "$bc" \
      "$(awk -v s="$s" -v b="$b" 'BEGIN { print (b > 0) ? s / b : 0 }')" \
      "$(awk -v s="$sc" -v b="$bc" 'BEGIN { print (s > 0) ? b / s : 0 }')"
  done
done
echo
echo "ratio: serve's requests/s over bare's (of the medians, and the median of the rounds' own"
echo "ratios, which pairs runs made back to back); CPU ratio: bare's CPU per request over serve's"
echo "(1 = as cheap)"
printf '%-15s %12s %12s %8s %12s %14s %14s %10s\n' path "serve req/s" "bare req/s" ratio \
  "round ratio" "serve µs/req" "bare µs/req" "CPU ratio"
for entry in "${paths[@]}"; do
  read -r path _ <<<"$entry"
  column() { awk -v p="$path" -v c="$1" '$1 == p { print $c }' "$work/rps" | median; }
  s=$(column 2) b=$(column 3) sc=$(column 4) bc=$(column 5)
  rounds=$(awk -v p="$path" '$1 == p { print ($3 > 0) ? $2 / $3 : 0 }' "$work/rps" | median)
  printf '%-15s %12.0f %12.0f %8.2f %12.2f %14.1f %14.1f %10.2f\n' "$path" "$s" "$b" \
    "$(awk -v s="$s" -v b="$b" 'BEGIN { print (b > 0) ? s / b : 0 }')" "$rounds" "$sc" "$bc" \
    "$(awk -v s="$sc" -v b="$bc" 'BEGIN { print (s > 0) ? b / s : 0 }')"
done

if [ "$RATE" != 0 ]; then
  echo
  echo "open loop at $RATE requests/s for $RATE_DURATION (examples/rate_client, 16 connections)"
  for entry in "${paths[@]}"; do
    read -r path body <<<"$entry"
    for server in serve bare; do
      port=$serve_port
      [ "$server" = bare ] && port=$bare_port
      printf '%-15s %-5s ' "$path" "$server"
      "$bin/examples/rate_client" --url "https://localhost:$port$path" --ca "$tls/ca.crt" \
        --body "$body" --rate "$RATE" --duration "$RATE_DURATION"
    done
  done
fi
