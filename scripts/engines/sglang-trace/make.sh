#!/usr/bin/env bash
# Regenerate tests/data/import/sglang/engine/<version>/<scenario>/ by running
# SGLang's own request tracing (--enable-trace) on this machine: no GPU, no torch.
#
#   scripts/engines/sglang-trace/make.sh                 # every version, every scenario
#   VERSIONS=0.5.23 SCENARIOS="overlap abort" scripts/engines/sglang-trace/make.sh
#
# 0.5.10 and later trace with sglang/srt/observability/trace.py and are driven by
# drive.py; 0.5.3-0.5.9 trace with sglang/srt/tracing/trace.py (a function API
# keyed by rid) and are driven by drive_053.py, which checks that the wheel has
# the call sites it reproduces (those of 0.5.3 or of 0.5.9). The driver is picked
# by which of the two files the wheel has. 0.5.9 also gets the "metrics" scenario
# (--enable-metrics changes its root attributes; no other version's spans).
#
# Per version it makes a venv in ~/.cache/tokenscope-sglang/venv-<version>
# (outside the repo), downloads the sglang wheel from PyPI, checks its sha256
# against the table below when the wheel is the one recorded there, installs it
# with --no-deps, then installs requirements.txt (OpenTelemetry API/SDK, the
# OTLP gRPC and HTTP exporters, opentelemetry-proto, grpcio, protobuf, msgspec;
# all pinned). Python 3.11 is what was used (0.5.23's wheel here is cp311).
#
# What runs from the wheel: sglang/srt/observability/trace.py and
# req_time_stats.py unchanged (plus environ.py, runtime_context.py,
# utils/poll_timer.py, arg_groups/* that they import), and, cut out of their
# files with `ast` and executed as they are: ForwardMode, DisaggregationMode,
# get_int_env_var/get_bool_env_var, BaseFinishReason and FINISH_*,
# TokenizerManager.convert_to_span_attrs and _get_scheduler_first_token_time.
#
# Stubbed in sys.modules (sgl_stubs.py says why for each), because importing
# them needs torch/CUDA/triton or the whole server configuration:
#   sglang (package __init__: frontend language, transformers patches),
#   sglang.srt.utils (utils/common.py: torch, numpy, triton, psutil),
#   sglang.srt.model_executor.forward_batch_info (torch),
#   sglang.srt.disaggregation.utils (torch, KV transfer),
#   sglang.srt.managers.schedule_batch (torch; trace.abort() imports it),
#   sglang.srt.observability.metrics_collector (server_args/torch, prometheus;
#     metrics are off, as in a default server).
# The scheduler, tokenizer manager and DP controller around the tracing calls
# are a model written in drive.py (the model's forward pass is a sleep).
#
# For 0.5.3-0.5.9: sglang/srt/tracing/trace.py runs unchanged; stubbed are only
# sglang (package __init__), sglang.srt.utils (get_int_env_var for 0.5.9) and
# sglang.srt.managers.schedule_batch (FINISH_* and RequestStage, compiled from the
# wheel); TokenizerManager.convert_to_span_attrs (0.5.9) is cut out and run as is.
# The server around it is drive_053.py's model.
#
# Each scenario takes a few seconds (spawned processes start in ~1 s each).
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ next to the scripts

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
OUT="$ROOT/tests/data/import/sglang/engine"
CACHE="${TOKENSCOPE_SGLANG_CACHE:-$HOME/.cache/tokenscope-sglang}"
PYTHON="${PYTHON:-python3}"
VERSIONS="${VERSIONS:-0.5.3 0.5.9 0.5.10 0.5.23}"
ALL_SCENARIOS="overlap no-overlap retract abort dp2 tp2 mixed"

# Wheels these fixtures were made from (pip download --no-deps sglang==V, Python 3.11).
declare -A WHEEL_SHA256=(
  [sglang-0.5.3-py3-none-any.whl]=14b20822b7c36d7069556e559181bcaa1d3d44b2b0fcbf8818313af4ca22ae7f
  [sglang-0.5.9-py3-none-any.whl]=8a936c4d25fea605f44254e533cff2144c73ceffbc1f8738aba393461bbb64d1
  [sglang-0.5.10-py3-none-any.whl]=ac8855a5d57dac8831fee526bca5212f1ae451f378e2ab08b3baecbc4deb4076
  [sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl]=00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937
)

for v in $VERSIONS; do
  venv="$CACHE/venv-$v"
  wheels="$CACHE/wheels-$v"
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('sglang') != '$v')" 2>/dev/null; then
    echo "== venv for sglang $v"
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv"
    "$venv/bin/pip" install -q --upgrade pip
    mkdir -p "$wheels"
    "$venv/bin/pip" download -q --no-deps "sglang==$v" -d "$wheels"
    whl="$(ls "$wheels"/sglang-"$v"-*.whl | head -1)"
    sum="$(sha256sum "$whl" | cut -d' ' -f1)"
    want="${WHEEL_SHA256[$(basename "$whl")]:-}"
    if [ -n "$want" ] && [ "$sum" != "$want" ]; then
      echo "sha256 mismatch for $(basename "$whl"): $sum (want $want)" >&2
      exit 1
    fi
    [ -n "$want" ] || echo "note: $(basename "$whl") is not the wheel the fixtures were made from (sha256 $sum)"
    "$venv/bin/pip" install -q --no-deps "$whl"
    "$venv/bin/pip" install -q -r "$HERE/requirements.txt"
  fi
  sgdir="$("$venv/bin/python" -c "import importlib.util as u; print(list(u.find_spec('sglang').submodule_search_locations)[0])")"
  if [ -f "$sgdir/srt/observability/trace.py" ]; then
    driver="$HERE/drive.py"
  elif [ -f "$sgdir/srt/tracing/trace.py" ]; then
    driver="$HERE/drive_053.py"
  else
    echo "sglang $v has no request tracing this harness knows" >&2
    exit 1
  fi
  scenarios="${SCENARIOS:-$ALL_SCENARIOS}"
  if [ -z "${SCENARIOS:-}" ] && [ "$v" = 0.5.9 ]; then
    scenarios="$scenarios metrics"
  fi
  for s in $scenarios; do
    echo "== sglang $v: $s ($(basename "$driver"))"
    "$venv/bin/python" "$driver" --scenario "$s" --out "$OUT/$v/$s"
  done
  (cd "$OUT/$v" && "$PYTHON" "$HERE/check.py" $scenarios)
done
