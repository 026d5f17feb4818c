#!/usr/bin/env bash
# The release build's two budgets (docs/PERFORMANCE.md, "Build cost"): a cold `cargo build --release` from an empty
# target directory, timed, and the binary's size stripped. Nothing else should build meanwhile.
#
#   scripts/bench/build-cost.sh [REV ...]      (default: HEAD; several: built one after the other, in one run)
#
# Each revision is built from a clean export of its commit (`git archive`), never from the working tree, so an
# uncommitted edit cannot change the figures and editing during the run cannot either. Per revision it prints the
# wall time, the CPU time, the peak memory and the stripped size; the exports and target directories are fresh ones
# under TMPDIR, removed afterwards.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -gt 0 ] || set -- HEAD
work=$(mktemp -d "${TMPDIR:-/tmp}/tokenscope-build-cost.XXXXXX")
trap 'rm -rf "$work"' EXIT
for rev in "$@"; do
  sha=$(git -C "$repo" rev-parse --short=10 "$rev^{commit}")
  tree="$work/$sha/src"
  target="$work/$sha/target"
  mkdir -p "$tree" "$target"
  git -C "$repo" archive "$sha" | tar -x -C "$tree"
  echo "== $rev ($sha, $(git -C "$repo" log -1 --format=%cs "$sha")): cold release build of a clean export" >&2
  # Sources downloaded first, so that the timed build only builds.
  (cd "$tree" && cargo fetch --quiet)
  start=$(date +%s)
  (cd "$tree" && /usr/bin/time -v -o "$target/time.txt" \
    env CARGO_TARGET_DIR="$target" cargo build --release -p tokenscope --quiet)
  end=$(date +%s)
  strip -o "$target/stripped" "$target/release/tokenscope"
  wall=$((end - start))
  cpu=$(awk -F': ' '/User time/ {u=$2} /System time/ {s=$2} END {printf "%.0f", u + s}' "$target/time.txt")
  peak=$(awk -F': ' '/Maximum resident/ {printf "%.1f", $2 / 1048576}' "$target/time.txt")
  printf '%s  cold build   %d min %02d s wall, %d min %02d s CPU, peak %s GiB\n' "$sha" \
    $((wall / 60)) $((wall % 60)) $((cpu / 60)) $((cpu % 60)) "$peak"
  size=$(stat -c %s "$target/release/tokenscope")
  stripped=$(stat -c %s "$target/stripped")
  awk -v r="$sha" -v s="$size" -v t="$stripped" \
    'BEGIN { printf "%s  binary       %d bytes, %d bytes stripped (%.1f MB)\n", r, s, t, t / 1e6 }'
  # A release target is some GB: freed before the next revision builds.
  rm -rf "$target" "$tree"
done
