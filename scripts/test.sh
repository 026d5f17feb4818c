#!/usr/bin/env bash
# The README's second command: installs what the tests need on a Debian or Ubuntu machine, then runs every test.
# It installs only what is missing: Debian's packages as root or with sudo, PySpark (pinned) into a virtual
# environment of its own under target/ unless the python3 on PATH has it. Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo is missing: install Rust 1.95 or later with rustup (https://rustup.rs), then run this again" >&2
  exit 1
fi

# Debian's packages the tests need, each only when what it provides is missing.
missing=()
# A C compiler and pkg-config for the -sys crates (zstd, lz4).
command -v cc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
# Mesa's EGL and software rasterizer: the headless PNG renders (tests/it/cli_render.rs) draw through them with no GPU.
if ! { ldconfig -p 2>/dev/null || /sbin/ldconfig -p; } | grep -q 'libEGL_mesa.so.0'; then
  missing+=(libegl1 libegl-mesa0)
fi
compgen -G '/usr/lib/*/dri/swrast_dri.so' >/dev/null || compgen -G '/usr/lib/*/dri/llvmpipe_dri.so' >/dev/null ||
  missing+=(libgl1-mesa-dri)
# A JDK for Apache Spark (tests/it/fleet.rs runs sql/tokenscope.sql on it in local mode).
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
# A font with Chinese, Japanese and Korean glyphs (tests/it/gui_opening.rs draws all three scripts).
[ -e /usr/share/fonts/truetype/wqy/wqy-microhei.ttc ] || missing+=(fonts-wqy-microhei)
# Python 3 with venv and pip, for PySpark.
command -v python3 >/dev/null 2>&1 || missing+=(python3)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)

if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = "0" ]; then
    as_root=()
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo)
  else
    echo "the tests need these Debian packages, which only root can install: ${missing[*]}" >&2
    echo "install them (sudo apt-get install ${missing[*]}), then run this again" >&2
    exit 1
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "no apt-get: install the equivalents of these Debian packages, then run this again: ${missing[*]}" >&2
    exit 1
  fi
  echo "installing ${missing[*]}" >&2
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# PySpark, pinned: the python3 on PATH when it has it, else a virtual environment of the tests' own, put first on
# PATH for them (tests/it/fleet.rs runs `python3`).
if ! python3 -c 'import pyspark' >/dev/null 2>&1; then
  venv=target/test-python
  if ! "$venv/bin/python3" -c 'import pyspark' >/dev/null 2>&1; then
    echo "installing PySpark 4.3.0 into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check pyspark==4.3.0
  fi
  PATH="$PWD/$venv/bin:$PATH"
  export PATH
fi

cargo test "$@"
