#!/usr/bin/env bash
# Regenerates tests/data/import/vllm/engine/<version>/<scenario>/ with vLLM's own request-span code: no GPU, no
# torch. Per version, a venv under ~/.cache/tokenscope-vllm/ gets the vLLM wheel (pip install --no-deps) and a pinned
# handful of pure-Python/small dependencies (OpenTelemetry SDK and OTLP exporters, numpy, msgspec, pydantic, ...);
# drive.py fakes the rest (torch, CUDA-side vLLM modules, Hugging Face) and runs the scenarios; ../otlp_receiver.py
# is the local OTLP endpoint (gRPC, or HTTP/protobuf for the `length` scenario) that writes what vLLM's exporter sent.
#
#   scripts/engines/vllm-trace/make.sh [VERSION...]        (default: 0.33.0 0.15.1)
#
# Needs python3.11+ (vLLM 0.33 requires it; PYTHON=... picks another interpreter) and PyPI. Each run rewrites the
# scenario folders; ids and timings differ between runs.
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ next to the scripts
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
cache=${TOKENSCOPE_VLLM_CACHE:-$HOME/.cache/tokenscope-vllm}
python=${PYTHON:-python3}
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(0.33.0 0.15.1)
scenarios=(stream_eos length long_prompt abort prefix_cache parallel_n2)
declare -A protocol=([length]=http/protobuf)
deps=(
  opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-semantic-conventions==0.66b2
  opentelemetry-proto==1.45.2 opentelemetry-exporter-otlp-proto-common==1.45.2
  opentelemetry-exporter-otlp-proto-grpc==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2
  opentelemetry-exporter-otlp-common==0.66b2 opentelemetry-exporter-http-transport==0.66b2
  grpcio==1.85.3 protobuf==7.36.2 googleapis-common-protos==1.76.0
  requests==2.34.2 urllib3==2.8.0 idna==3.20 certifi==2026.10.19.post1 charset-normalizer==3.5.3
  numpy==2.4.6 msgspec==0.23.0 pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0
  typing_extensions==4.16.0 typing-inspection==0.4.5 packaging==26.4 regex==2026.11.19 cbor2==6.3.0
  psutil==7.2.2 pyzmq==27.3.0 prometheus_client==0.26.0 cloudpickle==3.1.3
)
receiver=
trap '[ -z "$receiver" ] || kill "$receiver" 2>/dev/null || true' EXIT
# The spans must not pick up the caller's OpenTelemetry settings or a traceparent in the environment.
clean_env=()
while IFS= read -r name; do
  clean_env+=(-u "$name")
done < <(compgen -e | grep -iE '^(OTEL_|TRACEPARENT$|TRACESTATE$)' || true)

for v in "${versions[@]}"; do
  venv=$cache/venv-$v
  installed=$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('vllm'))" 2>/dev/null || true)
  if [ "$installed" != "$v" ]; then
    rm -rf "$venv"
    "$python" -m venv "$venv"
    mkdir -p "$cache/wheels"
    ls "$cache"/wheels/vllm-"$v"-*.whl >/dev/null 2>&1 ||
      "$venv/bin/pip" download --quiet --no-deps "vllm==$v" -d "$cache/wheels"
    "$venv/bin/pip" install --quiet --no-deps "$cache"/wheels/vllm-"$v"-*.whl
  fi
  "$venv/bin/pip" install --quiet --no-deps "${deps[@]}"
  wheel=$(ls "$cache"/wheels/vllm-"$v"-*.whl)
  out=$repo/tests/data/import/vllm/engine/$v
  mkdir -p "$out"
  {
    echo "$(basename "$wheel") sha256 $(sha256sum "$wheel" | cut -d' ' -f1)"
    echo "python $("$venv/bin/python" -c 'import platform; print(platform.python_version())')"
    "$venv/bin/pip" freeze --quiet 2>/dev/null | grep -v '^vllm ' | LC_ALL=C sort
  } >"$out/versions.txt"
  for s in "${scenarios[@]}"; do
    dir=$out/$s
    rm -rf "$dir"
    mkdir -p "$dir"
    ready=$(mktemp -u)
    env "${clean_env[@]}" "$venv/bin/python" "$here/../otlp_receiver.py" --layout vllm "$dir" "$ready" &
    receiver=$!
    for _ in $(seq 1 100); do [ -s "$ready" ] && break; sleep 0.1; done
    proto=${protocol[$s]:-grpc}
    # gRPC goes to http://host:port: up to 0.15 vLLM builds the gRPC exporter without insecure=True, and the exporter
    # then speaks TLS to any other scheme (grpc://, bare host:port). 0.16+ passes insecure=True.
    if [ "$proto" = grpc ]; then
      endpoint=http://$("$venv/bin/python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["grpc"])' "$ready")
    else
      endpoint=$("$venv/bin/python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["http"])' "$ready")
    fi
    env "${clean_env[@]}" OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="$proto" \
      "$venv/bin/python" "$here/drive.py" "$s" "$dir" "$endpoint"
    kill "$receiver"
    wait "$receiver" || true
    receiver=
    rm -f "$ready"
    touch "$dir/spans.jsonl" # a scenario whose requests left no span keeps an empty file
    echo "vllm $v $s: $(wc -l <"$dir/spans.jsonl") export(s), $(ls "$dir" | grep -c '\.pb$') body file(s)"
  done
  "$venv/bin/python" "$here/check.py" "${scenarios[@]/#/$out/}"
done
