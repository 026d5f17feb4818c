#!/usr/bin/env bash
# vLLM's own span code sending to `tokenscope watch --otlp`: every scenario of both versions, over gRPC (the
# exporter's default) and over OTLP/HTTP protobuf, into one watch that follows nothing else. Passes when no export
# was refused and the watch's ring holds every request whose span the scenarios' truth.json expects (vLLM makes none
# for a request aborted before it was scheduled, and 0.15.1 none for any aborted one). Needs the venvs make.sh
# made (~/.cache/tokenscope-vllm) and a built tokenscope (TOKENSCOPE=..., default target/debug/tokenscope).
#
#   scripts/engines/vllm-trace/watch.sh
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
bin=${TOKENSCOPE:-$repo/target/debug/tokenscope}
cache=${TOKENSCOPE_VLLM_CACHE:-$HOME/.cache/tokenscope-vllm}
port=${PORT:-43190}
work=$(mktemp -d)
watch=
trap '[ -z "$watch" ] || kill "$watch" 2>/dev/null || true; rm -rf "$work"' EXIT
touch "$work/server.log"
"$bin" watch --log "$work/server.log" --otlp "127.0.0.1:$port" --json --interval-s 0.2 --idle-exit 3 \
  --keep-s 100000 --incidents "$work/kept" >"$work/findings.jsonl" 2>"$work/watch.txt" &
watch=$!
for _ in $(seq 1 50); do grep -q "receiving spans" "$work/watch.txt" 2>/dev/null && break; sleep 0.1; done
expected=0
for v in 0.33.0 0.15.1; do
  for s in stream_eos length long_prompt abort prefix_cache parallel_n2; do
    for proto in grpc http/protobuf; do
      out=$work/$v-$s-${proto//\//-}
      mkdir -p "$out"
      endpoint=http://127.0.0.1:$port
      [ "$proto" = grpc ] || endpoint=$endpoint/v1/traces
      env -u TRACEPARENT OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="$proto" \
        "$cache/venv-$v/bin/python" "$here/drive.py" "$s" "$out" "$endpoint" >"$out/drive.txt" 2>&1
      n=$("$cache/venv-$v/bin/python" -c 'import json, sys; print(sum(1 for r in json.load(open(sys.argv[1]))["requests"] if r["span_expected"]))' "$out/truth.json")
      expected=$((expected + n))
      echo "vllm $v $s over $proto: $n request span(s)"
    done
  done
done
wait "$watch"
watch=
tail -1 "$work/watch.txt"
held=$("$bin" summary --json "$work/kept/ring" | "$cache/venv-0.33.0/bin/python" -c 'import json, sys; print(json.load(sys.stdin)["requests"])')
echo "requests sent $expected, held by the watch $held"
grep -q ", 0 refused" "$work/watch.txt" || { echo "FAIL: an export was refused" >&2; exit 1; }
[ "$held" = "$expected" ] || { echo "FAIL: the watch holds $held requests, the scenarios made $expected" >&2; exit 1; }
echo PASS
