#!/usr/bin/env bash
# Real runs of llama-server (Gemma 3 270M, 4 slots, its log at -lv 5) recorded and joined with their logs, for the
# findings' precision on healthy and incident runs (docs/FINDINGS.md, "Real runs") and for speculative decoding
# (docs/SPECULATIVE.md): each run is RUN.client.parquet (the recording), RUN.server.log (the server's log) and
# RUN.joined.parquet (both, joined).
#
#   scripts/llamacpp/record-runs.sh [OUT_DIR] [RUN...]   (default: target/real-runs, every run)
#
# The runs:
#   healthy-c1    12 short chat prompts one at a time
#   healthy-c4    the same 12, four at a time (they batch; every Gemma prompt is prefilled in two or three pieces)
#   healthy-c4b   the next 12 prompts, four at a time, another seed
#   incident      scripts/llamacpp/incident_prompts.jsonl: three answers decoding when a 2,574-token prompt arrives
#   watch         the same incident sent by record while `tokenscope watch` follows only the log and /metrics
#   spec          the 12 of healthy-c4 with speculative decoding: the model drafts for itself (-md, draft-simple,
#                 4 drafts a step), sampling at temperature 0.7 so that some drafts are rejected
#   spec-greedy   the same at temperature 0: the target agrees with its own greedy drafts more often
#   greedy-c1     the 12 of healthy-c1 at temperature 0, one at a time, on a server with 8 slots
#   greedy-c8     the same, eight at a time: batched, some answers part from greedy-c1's at a near tie
#   seed-7        the 12 at temperature 0.8, seed 7, one at a time
#   seed-8        the same with seed 8: the answers part by sampling, the distributions agree up to there
# Needs a release build of tokenscope (cargo build --release) or TOKENSCOPE naming one.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-target/real-runs}
shift || true
runs=("$@")
[ "${#runs[@]}" -gt 0 ] || runs=(healthy-c1 healthy-c4 healthy-c4b incident spec spec-greedy greedy-c1 greedy-c8 seed-7 seed-8)
mkdir -p "$out"
mapfile -t built < <(scripts/llamacpp/build-llama-server.sh | tail -n 2)
server=${built[0]}
model=${built[1]}
ts=${TOKENSCOPE:-target/release/tokenscope}
[ -x "$ts" ] || { echo "no $ts: cargo build --release first, or set TOKENSCOPE" >&2; exit 1; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pid=

serve() {
  local name=$1
  shift
  rm -f "$out/$name.server.log"
  "$server" -m "$model" --host 127.0.0.1 --port "$port" -c 16384 -np 4 -t 2 --metrics --no-webui \
    --chat-template-file scripts/llamacpp/gemma.jinja -lv 5 --log-colors off --log-file "$out/$name.server.log" \
    "$@" >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 1 60); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && return 0
    sleep 1
  done
  echo "llama-server did not start for $name" >&2
  exit 1
}
stop() {
  sleep 1
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
trap 'kill $pid 2>/dev/null || true' EXIT

# The first 12 and the next 12 chat prompts of the real prompt set.
head -n 12 scripts/llamacpp/real_prompts.jsonl >"$out/prompts-a.jsonl"
sed -n '13,24p' scripts/llamacpp/real_prompts.jsonl >"$out/prompts-b.jsonl"

record() {
  local name=$1 prompts=$2 concurrency=$3
  shift 3
  "$ts" record --url "http://127.0.0.1:$port" --prompts "$prompts" --requests 12 --concurrency "$concurrency" \
    --max-tokens 64 --top-logprobs 5 "$@" -o "$out/$name.client.parquet"
}

for run in "${runs[@]}"; do
  echo "== $run"
  case $run in
    healthy-c1)
      serve "$run"
      record "$run" "$out/prompts-a.jsonl" 1 --temperature 0.7 --sampling-seed 7 ;;
    healthy-c4)
      serve "$run"
      record "$run" "$out/prompts-a.jsonl" 4 --temperature 0.7 --sampling-seed 7 ;;
    healthy-c4b)
      serve "$run"
      record "$run" "$out/prompts-b.jsonl" 4 --temperature 0.7 --sampling-seed 11 ;;
    incident)
      serve "$run"
      "$ts" record --url "http://127.0.0.1:$port" --prompts scripts/llamacpp/incident_prompts.jsonl --requests 5 \
        --concurrency 5 --top-logprobs 5 --temperature 0.7 --sampling-seed 7 -o "$out/$run.client.parquet" ;;
    watch)
      # tokenscope watch follows the server's log and /metrics only; a separate client (record) sends the scripted
      # incident; watch stops 5 s after the log stops growing, its findings in watch.findings.jsonl and each kept
      # incident in watch-incidents/.
      serve "$run"
      rm -rf "$out/watch-incidents"
      "$ts" watch --log "$out/$run.server.log" --metrics "http://127.0.0.1:$port/metrics" --incidents \
        "$out/watch-incidents" --json --idle-exit 5 >"$out/watch.findings.jsonl" 2>"$out/watch.stderr" &
      watcher=$!
      "$ts" record --url "http://127.0.0.1:$port" --prompts scripts/llamacpp/incident_prompts.jsonl --requests 5 \
        --concurrency 5 --top-logprobs 5 --temperature 0.7 --sampling-seed 7 -o "$out/$run.client.parquet"
      wait "$watcher"
      cat "$out/watch.stderr" ;;
    spec)
      serve "$run" -md "$model" --spec-type draft-simple --spec-draft-n-max 4
      record "$run" "$out/prompts-a.jsonl" 4 --temperature 0.7 --sampling-seed 7 ;;
    spec-greedy)
      serve "$run" -md "$model" --spec-type draft-simple --spec-draft-n-max 4
      record "$run" "$out/prompts-a.jsonl" 4 --temperature 0 ;;
    greedy-c1 | greedy-c8)
      serve "$run" -np 8
      record "$run" "$out/prompts-a.jsonl" "${run#greedy-c}" --temperature 0 ;;
    seed-7 | seed-8)
      serve "$run"
      record "$run" "$out/prompts-a.jsonl" 1 --temperature 0.8 --sampling-seed "${run#seed-}" ;;
    *)
      echo "unknown run $run" >&2
      exit 2 ;;
  esac
  stop
  "$ts" convert "$out/$run.client.parquet" "$out/$run.server.log" -o "$out/$run.joined.parquet"
  "$ts" summary "$out/$run.joined.parquet" | head -n 12
  "$ts" findings "$out/$run.joined.parquet" | head -n 3
done
