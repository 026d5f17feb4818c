#!/usr/bin/env bash
# Regenerates the measured part of docs/FIDELITY.md from the committed runs of tests/data/fidelity/ (recorded by
# scripts/fidelity/runs.sh): the profile fitted on the mid-load run, its error on every other run, and the server's
# own spread between the two repeats of each load. Rewrites the text between the `<!-- measured -->` markers, and
# the profile tests/data/fidelity/profile.json that tests/it/fit.rs pins.
#
#   scripts/fidelity/report.sh
#
# Uses target/debug/tokenscope (cargo build), or TOKENSCOPE=path. Deterministic: the fit and the seeded replays give
# the same figures on every run.
set -euo pipefail
cd "$(dirname "$0")/../.."
ts=${TOKENSCOPE:-target/debug/tokenscope}
[ -x "$ts" ] || cargo build
d=tests/data/fidelity
out=$(mktemp)
spread=$(mktemp -d)
for load in low mid high; do
  (cd "$d" && "../../../$ts" diff "$load-a.parquet" "$load-b.parquet" --fidelity --json) >"$spread/$load.json"
done
{
  (cd "$d" && "../../../$ts" fit mid-a.parquet --validate low-a.parquet --validate low-b.parquet \
    --validate mid-b.parquet --validate high-a.parquet --validate high-b.parquet --name llamacpp-gemma3-270m-2cpu \
    -o profile.json >/dev/null)
  python3 - "$d/profile.json" "$spread" <<'PY'
import json, sys
profile = json.load(open(sys.argv[1]))
def cell(rows, figure, p):
    for r in rows:
        if r["figure"] == figure and r["percentile"] == p:
            e = r["error_pct"]
            if e is None:
                return "-"
            mark = "" if r["within"] else " ✗"
            return f"{e:+.1f} %{mark}"
    return "-"
cols = [("TTFT", 50), ("TTFT", 95), ("TTFT", 99), ("ITL", 50), ("ITL", 95), ("ITL", 99), ("E2E", 50), ("E2E", 95)]
head = "| run | " + " | ".join(f"{f} p{p}" for f, p in cols) + " |"
print("The simulator with the profile fitted on `mid-a`, against each run it did not see (signed error of the")
print("replay, ✗ beyond 10 % and 5 ms):")
print()
print(head)
print("|" + "---|" * (len(cols) + 1))
for v in profile["validation"]:
    print(f"| `{v['trace']}` | " + " | ".join(cell(v["fidelity"]["rows"], f, p) for f, p in cols) + " |")
print()
print("The server against itself: the second run of each load (the same arrivals and prompts) against the first:")
print()
print(head)
print("|" + "---|" * (len(cols) + 1))
for load in ["low", "mid", "high"]:
    f = json.load(open(f"{sys.argv[2]}/{load}.json"))
    print(f"| `{load}-b` vs `{load}-a` | " + " | ".join(cell(f["rows"], a, p) for a, p in cols) + " |")
print()
PY
  echo "The fit and one held-out run in full (\`tests/docs.rs\` runs this example and checks its output):"
  echo
  echo '```console'
  echo "\$ tokenscope fit $d/mid-a.parquet --validate $d/high-a.parquet --report"
  "$ts" fit "$d/mid-a.parquet" --validate "$d/high-a.parquet" --report
  echo
  echo "\$ tokenscope diff $d/high-a.parquet $d/high-b.parquet --fidelity"
  "$ts" diff "$d/high-a.parquet" "$d/high-b.parquet" --fidelity
  echo
  echo '```'
} >"$out"
python3 - "$out" <<'PY'
import re, sys
doc = "docs/FIDELITY.md"
text = open(doc).read()
measured = open(sys.argv[1]).read()
start, end = "<!-- measured -->", "<!-- /measured -->"
i, j = text.index(start) + len(start), text.index(end)
open(doc, "w").write(text[:i] + "\n" + measured + text[j:])
PY
rm -rf "$out" "$spread"
echo "rewrote docs/FIDELITY.md and $d/profile.json"
