#!/usr/bin/env bash
# Builds tokenscope's Debian package into target/debian/ with cargo-deb (installed first when missing, pinned); the
# package's contents are Cargo.toml's [package.metadata.deb]. Install it with `sudo dpkg -i target/debian/*.deb`.
#   scripts/package-deb.sh                      a release build, then its package
#   scripts/package-deb.sh --from-debug-build   the binary a `cargo test` or `cargo build` already made (CI: no
#                                               second build; larger and slower than a release build)
set -euo pipefail
cd "$(dirname "$0")/.."

cargo_deb_version=3.7.0
if ! cargo deb --version 2>/dev/null | grep -q "$cargo_deb_version"; then
  echo "installing cargo-deb $cargo_deb_version" >&2
  cargo install --quiet --locked "cargo-deb@$cargo_deb_version"
fi
case "${1:-}" in
  --from-debug-build)
    [ -x target/debug/tokenscope ] || { echo "no target/debug/tokenscope: run cargo build (or scripts/test.sh) first" >&2; exit 1; }
    cargo deb -p tokenscope --no-build --profile dev --fast ;;
  "")
    cargo deb -p tokenscope ;;
  *)
    echo "usage: scripts/package-deb.sh [--from-debug-build]" >&2
    exit 2 ;;
esac
