#!/usr/bin/env bash
# Regenerates tests/data/import/vllm/logs/ and tests/data/import/sglang/logs/: server logs written
# by the engines' own logging code (no GPU, no torch), with a .truth.json per log.
#
#   scripts/engines/engine-logs/make.sh                       # every installed version, every scenario
#   VLLM_VERSIONS=0.33.0 SGLANG_VERSIONS= scripts/engines/engine-logs/make.sh
#   VLLM_SCENARIOS=pd-nixl SGLANG_VERSIONS= scripts/engines/engine-logs/make.sh   # some vLLM scenarios only
#
# The engine venvs are the ones the trace harnesses build (scripts/engines/vllm-trace/make.sh:
# ~/.cache/tokenscope-vllm/venv-<v>; scripts/engines/sglang-trace/make.sh: ~/.cache/tokenscope-sglang/venv-<v>);
# run those first on a fresh machine. This script adds nothing to them: uvicorn, h11, click and
# tqdm (pinned below) go to a separate --target directory put on PYTHONPATH, because the
# access/start-up lines and the progress bars are written by uvicorn's and tqdm's own code.
#
# Output is deterministic (virtual clock, fixed pids); re-running rewrites identical files.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
vcache=${TOKENSCOPE_VLLM_CACHE:-$HOME/.cache/tokenscope-vllm}
scache=${TOKENSCOPE_SGLANG_CACHE:-$HOME/.cache/tokenscope-sglang}
ecache=${TOKENSCOPE_ENGINE_LOGS_CACHE:-$HOME/.cache/tokenscope-engine-logs}
VLLM_VERSIONS=${VLLM_VERSIONS-0.15.1 0.33.0}
SGLANG_VERSIONS=${SGLANG_VERSIONS-0.5.3 0.5.9 0.5.10 0.5.23}
extras_pins=(uvicorn==0.54.0 h11==0.16.0 click==8.5.1 tqdm==4.70.1)

first_python=
for v in $VLLM_VERSIONS; do first_python=${first_python:-$vcache/venv-$v/bin/python}; done
for v in $SGLANG_VERSIONS; do first_python=${first_python:-$scache/venv-$v/bin/python}; done
[ -n "$first_python" ] || exit 0
pyver=$("$first_python" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
extras=$ecache/site-py$pyver
if ! PYTHONPATH=$extras "$first_python" -c 'import uvicorn, tqdm, sys; sys.exit(uvicorn.__version__ != "0.54.0" or tqdm.__version__ != "4.70.1")' 2>/dev/null; then
  rm -rf "$extras"
  "$first_python" -m pip install --quiet --no-deps --target "$extras" "${extras_pins[@]}"
fi
export PYTHONPATH=$extras
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ next to the drivers or in scripts/engines/{vllm,sglang}-trace

out=$repo/tests/data/import/vllm/logs
mkdir -p "$out"
for v in $VLLM_VERSIONS; do
  py=$vcache/venv-$v/bin/python
  [ -x "$py" ] || { echo "no venv for vllm $v ($py): run scripts/engines/vllm-trace/make.sh $v first" >&2; exit 1; }
  # pd-nixl: a prefill and a decode server with the NIXL KV connector; writes $v-pd-nixl-prefill.log,
  # $v-pd-nixl-decode.log (each with its .truth.json) and $v-pd-nixl.truth.json (the pair)
  scenarios=(single spec dp2 dp2-agg dp2-default dp2-spec dp2-skew overload pd-nixl)
  # 0.15-style process prefix (written into sys.stdout, ANSI-coloured unless NO_COLOR): also without colour
  if ! grep -q set_vllm_process_name "$("$py" -c 'import importlib.util as u; print(u.find_spec("vllm").submodule_search_locations[0])')/logger.py"; then
    scenarios+=(single-nocolor)
  fi
  [ -z "${VLLM_SCENARIOS:-}" ] || read -r -a scenarios <<<"$VLLM_SCENARIOS"
  for s in "${scenarios[@]}"; do
    base=$v; [ "$s" = single ] || base=$v-$s
    "$py" "$here/vllm_log.py" "$s" "$out/$base"
  done
done

# vLLM V0 (0.6.x-0.7.x) is not installable here: its fixture is written by hand from the quoted
# format strings (see vllm_v0_handwritten.py and the README)
"$first_python" "$here/vllm_v0_handwritten.py" "$repo/tests/data/import/vllm/logs/v0-0.6"

out=$repo/tests/data/import/sglang/logs
mkdir -p "$out"
for v in $SGLANG_VERSIONS; do
  py=$scache/venv-$v/bin/python
  [ -x "$py" ] || { echo "no venv for sglang $v ($py): run scripts/engines/sglang-trace/make.sh first" >&2; exit 1; }
  for s in single spec dp2 pd; do  # pd: writes $v-pd-prefill.log, $v-pd-decode.log, $v-pd.truth.json
    base=$v; [ "$s" = single ] || base=$v-$s
    "$py" "$here/sglang_log.py" "$s" "$out/$base"
  done
done
