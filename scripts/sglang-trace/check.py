#!/usr/bin/env python3
"""Check a scenario folder written by drive.py: spans.jsonl against truth.json.

Plain Python (no SGLang needed). Prints a summary per scenario and exits 1 when
a check fails. Checks, per request (a trace):
  - one root (module "sglang::request") with the trace id in truth.json;
  - gen_ai.usage.completion_tokens == output tokens == len(token_times_ns)
    (a request aborted in the waiting queue has no usage attributes);
  - each scheduler's decode_loop spans end exactly at the times of the tokens
    that came from decode batches (same ns), in order, decode_ct 0..n-1;
  - chunked_prefill spans (when the prompt was chunked) have the start/end of
    truth's prefill_chunks;
  - root start + gen_ai.latency.time_to_first_token is the tokenizer's first
    token time within 1 us;
  - every schedule event names a batch truth has for that scheduler, with the
    same batch_size, and each batch truth has appears on each member's trace;
  - every parentSpanId is a span of the file.

Usage: check.py DIR [DIR ...]
"""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict


def val(v):
    if "intValue" in v:
        return int(v["intValue"])
    for k in ("stringValue", "doubleValue", "boolValue"):
        if k in v:
            return v[k]
    return v


def attrs(x):
    return {a["key"]: val(a["value"]) for a in x.get("attributes", [])}


def load_spans(path):
    spans = []
    bodies = []
    for line in open(path, encoding="utf-8"):
        d = json.loads(line)
        names = set()
        for rs in d["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    spans.append(sp)
                    names.add(sp["name"].split(" (host")[0].split("(host")[0])
        bodies.append(names)
    return spans, bodies


def check(folder: str) -> list:
    errors = []
    truth = json.load(open(os.path.join(folder, "truth.json")))
    spans, bodies = load_spans(os.path.join(folder, "spans.jsonl"))
    by_id = {s["spanId"]: s for s in spans}
    by_trace = defaultdict(list)
    for s in spans:
        by_trace[s["traceId"]].append(s)
        p = s.get("parentSpanId")
        if p and p not in by_id:
            errors.append(f"span {s['name']} has a parent not in the file")
    batches = {(b["rank"], b["bid"]): b for b in truth["batches"]}
    seen_bids = set()
    counts = defaultdict(int)
    for s in spans:
        n = s["name"]
        counts["Scheduler" if n.startswith("Scheduler") else "Tokenizer" if n.startswith("Tokenizer")
               else "DP Controller" if n.startswith("DP Controller") else "root" if " Req " in n else n] += 1

    for r in truth["requests"]:
        tag = f"{truth['scenario']}/{r['key']}"
        tr = by_trace.get(r["trace_id"], [])
        roots = [s for s in tr if attrs(s).get("module") == "sglang::request"]
        if len(roots) != 1:
            errors.append(f"{tag}: {len(roots)} roots")
            continue
        root = roots[0]
        ra = attrs(root)
        if root["name"] != r["root_name"]:
            errors.append(f"{tag}: root name {root['name']!r}")
        ntok = len(r.get("token_times_ns", []))
        ct = ra.get("gen_ai.usage.completion_tokens")
        if ct is None:
            if r.get("finish_reason", {}).get("message") != "Abort in waiting queue":
                errors.append(f"{tag}: root has no completion_tokens")
        elif not (ct == r["output_tokens"] == ntok):
            errors.append(f"{tag}: completion_tokens {ct}, truth {r['output_tokens']}, token times {ntok}")
        # first token
        ttft = ra.get("gen_ai.latency.time_to_first_token")
        if ttft is not None:
            at = int(root["startTimeUnixNano"]) + ttft * 1e9
            if abs(at - r["tokenizer_first_token_ns"]) > 1000:
                errors.append(f"{tag}: root start + TTFT is {at - r['tokenizer_first_token_ns']:.0f} ns off")
        # per scheduler thread span
        threads = {s["spanId"]: s for s in tr if attrs(s).get("thread_label") == "Scheduler"}
        for sched in r.get("schedulers", []):
            rank = sched["scheduler"]
            want_tp = int(rank[2:].split("-")[0])
            th = [t for t in threads.values() if attrs(t).get("tp_rank") == want_tp]
            if len(th) != 1:
                errors.append(f"{tag}: {len(th)} scheduler thread spans for {rank}")
                continue
            th = th[0]
            under = set()
            frontier = {th["spanId"]}
            while frontier:
                nxt = {s["spanId"] for s in tr if s.get("parentSpanId") in frontier}
                under |= nxt
                frontier = nxt
            mine = [by_id[i] for i in under]
            loops = sorted((s for s in mine if s["name"] == "decode_loop"),
                           key=lambda s: int(s["endTimeUnixNano"]))
            dec = [t["ns"] for t in sched["tokens"] if batches[(rank, t["bid"])]["forward_mode"] == "decode"]
            if [int(s["endTimeUnixNano"]) for s in loops] != dec:
                errors.append(f"{tag}@{rank}: {len(loops)} decode_loop ends vs {len(dec)} decode tokens differ")
            cts = [attrs(s).get("decode_ct") for s in loops]
            if cts != list(range(len(cts))):
                errors.append(f"{tag}@{rank}: decode_ct {cts}")
            chunks = sorted((s for s in mine if s["name"] == "chunked_prefill"),
                            key=lambda s: int(s["startTimeUnixNano"]))
            first_pass = [c for c in sched["prefill_chunks"] if c["after_retracts"] == 0]
            if len(first_pass) >= 2:
                got = [(int(s["startTimeUnixNano"]), int(s["endTimeUnixNano"])) for s in chunks]
                want = [(c["start_ns"], c["end_ns"]) for c in first_pass]
                if got != want:
                    errors.append(f"{tag}@{rank}: chunked_prefill spans {len(got)} != truth {len(want)}")
            # schedule events
            evs = [e for s in mine + [th] for e in s.get("events", []) if e["name"] == "schedule"]
            ev_bids = set()
            for e in evs:
                ea = attrs(e)
                b = batches.get((rank, ea["bid"]))
                ev_bids.add(ea["bid"])
                seen_bids.add((rank, ea["bid"]))
                if b is None:
                    errors.append(f"{tag}@{rank}: schedule event for unknown batch {ea['bid']}")
                elif b["batch_size"] != ea["batch_size"] or r["rid"] not in b["members"]:
                    errors.append(f"{tag}@{rank}: batch {ea['bid']} size/members differ")
                elif int(e["timeUnixNano"]) != b["schedule_ns"]:
                    errors.append(f"{tag}@{rank}: batch {ea['bid']} time differs")
            member_of = {b["bid"] for (rk, _), b in batches.items() if rk == rank and r["rid"] in b["members"]}
            if member_of != ev_bids:
                errors.append(f"{tag}@{rank}: {len(member_of - ev_bids)} batches without event, "
                              f"{len(ev_bids - member_of)} events without batch")
    missing = {k for k in batches if k not in seen_bids}
    if missing:
        errors.append(f"{len(missing)} batches never seen in any trace")
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    print(f"{folder}: {len(spans)} spans in {len(bodies)} bodies, "
          f"{len(truth['requests'])} requests, {len(truth['batches'])} batches, {size // 1024} KiB; "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    for i, b in enumerate(bodies, 1):
        print(f"  body {i:03d}: {', '.join(sorted(b))[:150]}")
    for e in errors:
        print("  FAIL", e)
    return errors


def main() -> int:
    bad = 0
    for d in sys.argv[1:]:
        bad += len(check(d))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
