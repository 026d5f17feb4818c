#!/usr/bin/env bash
# Re-scores real llama.cpp runs (issue 46) against the llama-server that recorded them (Gemma 3 270M, built by
# build-llama-server.sh), and makes the planted copy the off-distribution finding is tested on:
#
#   scripts/llamacpp/rescore-runs.sh [OUT]       (default: tests/data/real/llamacpp-runs)
#
# greedy-c1 (temperature 0) and seed-7 (temperature 0.8) whole; greedy-c1-planted is greedy-c1 with rec-00003's
# token 20 ("Explain", id 155122) replaced by " banana" (id 30077, what the server's /tokenize gives it), re-scored
# for rec-00003 alone. The server runs as record-runs.sh runs it (-c 16384, the chat template file).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-tests/data/real/llamacpp-runs}
mapfile -t built < <(scripts/llamacpp/build-llama-server.sh | tail -n 2)
server=${built[0]}
model=${built[1]}
ts=${TOKENSCOPE:-target/release/tokenscope}
[ -x "$ts" ] || { echo "no $ts: cargo build --release first, or set TOKENSCOPE" >&2; exit 1; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$server" -m "$model" --host 127.0.0.1 --port "$port" -c 16384 -np 4 -t 2 --no-webui \
  --chat-template-file scripts/llamacpp/gemma.jinja >/dev/null 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 60); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  sleep 1
done
url="http://127.0.0.1:$port"

"$ts" rescore "$out/greedy-c1.client.parquet" --prompts "$out/prompts-a.jsonl" --url "$url" \
  -o "$out/greedy-c1.rescored.parquet"
"$ts" rescore "$out/seed-7.client.parquet" --prompts "$out/prompts-a.jsonl" --url "$url" \
  -o "$out/seed-7.rescored.parquet"

# The planted copy: one token of rec-00003 replaced in the recording's JSON lines, converted back.
work=$(mktemp -d)
"$ts" convert "$out/greedy-c1.client.parquet" -o "$work/greedy-c1.jsonl"
python3 - "$work/greedy-c1.jsonl" "$work/planted.jsonl" <<'PY'
import json, sys
with open(sys.argv[1]) as src, open(sys.argv[2], "w") as dst:
    for line in src:
        r = json.loads(line)
        if r.get("kind") == "token" and r.get("request_id") == "rec-00003" and r.get("index") == 20:
            assert r["token_id"] == 155122, r
            r["token_id"], r["text"] = 30077, " banana"
            r.pop("candidates", None), r.pop("logprob", None), r.pop("rank", None)
        dst.write(json.dumps(r) + "\n")
PY
"$ts" convert "$work/planted.jsonl" -o "$out/greedy-c1-planted.client.parquet"
"$ts" rescore "$out/greedy-c1-planted.client.parquet" --prompts "$out/prompts-a.jsonl" --url "$url" \
  --request rec-00003 -o "$out/greedy-c1-planted.rescored.parquet"
rm -rf "$work"
