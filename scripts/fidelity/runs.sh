#!/usr/bin/env bash
# Records the fidelity runs of docs/FIDELITY.md on this machine: llama.cpp's llama-server serving Gemma 3 270M with
# 4 slots and its log at debug level, driven by `tokenscope record` in a Poisson open loop at three loads (below
# saturation, near it, past it), each run twice to measure the server's own run-to-run spread. Every recording is
# joined with the server's log of the same run (`record --server-log`), so each trace has both halves: the client's
# tokens and the engine's steps, which `tokenscope fit` needs.
#
#   scripts/fidelity/runs.sh [OUT_DIR]      (default: tests/data/fidelity)
#
# Needs tokenscope built (target/release/tokenscope, or TOKENSCOPE=path). About 11 minutes on 2 cores (a closed loop of 4 streams serves about 0.8 requests per second here); nothing else
# should run meanwhile, since the server's step times are what is measured.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-tests/data/fidelity}
mkdir -p "$out"
mapfile -t built < <(scripts/llamacpp/build-llama-server.sh | tail -n 2)
server=${built[0]}
model=${built[1]}
ts=${TOKENSCOPE:-target/release/tokenscope}
[ -x "$ts" ] || cargo build --release
requests=${REQUESTS:-48}

run() { # name rate
  local name=$1 rate=$2 port log pid
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  log=$(mktemp)
  "$server" -m "$model" --host 127.0.0.1 --port "$port" -c 8192 -np 4 -t 2 --no-webui \
    --chat-template-file scripts/llamacpp/gemma.jinja -lv 5 --log-colors off --log-file "$log" >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 1 60); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
    sleep 1
  done
  # ignore_eos: every answer runs to its max_tokens (8 to 96), so the output lengths are the prompts' own.
  "$ts" record --url "http://127.0.0.1:$port" --prompts scripts/fidelity/prompts.jsonl --requests "$requests" \
    --rate "$rate" --concurrency 64 --seed "${SEED:-1}" --top-logprobs 0 --temperature 0.7 --sampling-seed 7 \
    --extra-body '{"ignore_eos": true}' --server-log "$log" -o "$out/$name.parquet"
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  gzip -9 -c "$log" >"$out/$name.server.log.gz"
  rm -f "$log"
}

for rep in a b; do
  for load in "low 0.25" "mid 0.6" "high 1.0"; do
    set -- $load
    run "$1-$rep" "$2"
  done
done
