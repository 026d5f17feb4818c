#!/usr/bin/env bash
# The release build's two budgets (docs/PERFORMANCE.md, "Build cost"): a cold `cargo build --release` from an empty
# target directory, timed, and the binary's size stripped. Nothing else should build meanwhile.
#
#   scripts/bench/build-cost.sh [TREE]        (default: this checkout; TREE: another checkout, to compare)
#
# Prints the wall time, the CPU time, the peak memory and the stripped size; the target directory is a fresh one
# under target/ (or TMPDIR), removed afterwards.
set -euo pipefail
tree=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
target=$(mktemp -d "${TMPDIR:-/tmp}/tokenscope-build-cost.XXXXXX")
trap 'rm -rf "$target"' EXIT
cd "$tree"
echo "cold release build of $tree ($(git -C "$tree" rev-parse --short HEAD 2>/dev/null || echo 'not a git checkout'))" >&2
# Sources downloaded first, so that the timed build only builds.
cargo fetch --quiet
start=$(date +%s)
/usr/bin/time -v -o "$target/time.txt" env CARGO_TARGET_DIR="$target" cargo build --release -p tokenscope --quiet
end=$(date +%s)
strip -o "$target/stripped" "$target/release/tokenscope"
wall=$((end - start))
cpu=$(awk -F': ' '/User time/ {u=$2} /System time/ {s=$2} END {printf "%.0f", u + s}' "$target/time.txt")
peak=$(awk -F': ' '/Maximum resident/ {printf "%.1f", $2 / 1048576}' "$target/time.txt")
printf 'cold build   %d min %02d s wall, %d min %02d s CPU, peak %s GiB\n' \
  $((wall / 60)) $((wall % 60)) $((cpu / 60)) $((cpu % 60)) "$peak"
size=$(stat -c %s "$target/release/tokenscope")
stripped=$(stat -c %s "$target/stripped")
awk -v s="$size" -v t="$stripped" 'BEGIN { printf "binary       %d bytes, %d bytes stripped (%.1f MB)\n", s, t, t / 1e6 }'
