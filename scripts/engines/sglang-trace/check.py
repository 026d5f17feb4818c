#!/usr/bin/env python3
"""Check a scenario folder written by drive.py or drive_053.py: spans.jsonl against truth.json.

Folders of 0.5.3-0.5.9 (truth.json has "call_sites") get check_rid_api(): per
request the root (bounds, attributes; 0.5.9: under its Bootstrap Room span, token
counts, finish reason, latencies), the tokenizer's and DP controller's slices,
and per scheduler rank the slices under its thread span, exactly as truth lists
them (ids, names, start/end), the link chain (first slice -> previous hop's last
slice, each slice -> the one before), token times = ends of the slices that
brought a token, chunk ends, and 0.5.9's schedule events against the batches;
spans left open (a request aborted in the waiting queue) must be absent and are
the only parents allowed to be missing. What follows is the 0.5.10+ check.

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


def _tp_of(rank: str) -> int:
    return int(rank[2:].split("-")[0])


def check_rid_api(folder: str) -> list:
    """0.5.3-0.5.9 (sglang/srt/tracing/trace.py, written by drive_053.py)."""
    errors = []
    truth = json.load(open(os.path.join(folder, "truth.json")))
    spans, bodies = load_spans(os.path.join(folder, "spans.jsonl"))
    v059 = truth["call_sites"] == "0.5.9"
    by_id = {s["spanId"]: s for s in spans}
    children = defaultdict(list)
    for s in spans:
        children[s.get("parentSpanId")].append(s)
    for k in children:
        children[k].sort(key=lambda s: (int(s["startTimeUnixNano"]), int(s["endTimeUnixNano"])))
    never = {n["span_id"] for r in truth["requests"] for n in r["never_exported"]}
    for s in spans:
        p = s.get("parentSpanId")
        if p and p not in by_id and p not in never:
            errors.append(f"span {s['name']} has a parent that is neither in the file nor left open")
    for i in never & set(by_id):
        errors.append(f"span {by_id[i]['name']} was left open but is in the file")
    batches = {(b["rank"], b["bid"]): b for b in truth["batches"] if b["bid"]}
    seen_bids = set()
    counts = defaultdict(int)
    for s in spans:
        n = s["name"]
        counts["Scheduler" if n.startswith("Scheduler") else "Tokenizer" if n.startswith("Tokenizer")
               else "DP Controller" if n.startswith("DP Controller") else "root" if "Req " in n
               else "Bootstrap Room" if n.startswith("Bootstrap Room") else n] += 1

    def links(s):
        return [lk["spanId"] for lk in s.get("links", [])]

    def se(s):
        return int(s["startTimeUnixNano"]), int(s["endTimeUnixNano"])

    for r in truth["requests"]:
        tag = f"{truth['scenario']}/{r['key']}"
        tr = [s for s in spans if s["traceId"] == r["trace_id"]]
        roots = [s for s in tr if s["name"] == r["root_name"]]
        ntok = len(r.get("token_times_ns", []))
        if not r["root_exported"]:
            if roots or r["root_span_id"] not in never:
                errors.append(f"{tag}: a root that was never ended is in the file")
        elif len(roots) != 1 or roots[0]["spanId"] != r["root_span_id"]:
            errors.append(f"{tag}: {len(roots)} roots")
        else:
            root = roots[0]
            ra = attrs(root)
            if se(root) != (r["created_ns"], r["finished_ns"]):
                errors.append(f"{tag}: root bounds differ")
            if ra.get("rid") != r["rid"]:
                errors.append(f"{tag}: root rid {ra.get('rid')}")
            if v059:
                b = by_id.get(root.get("parentSpanId"))
                if b is None or b["spanId"] != r["bootstrap_room_span_id"] or b.get("parentSpanId") \
                        or se(b) != se(root) or attrs(b) != {"bootstrap_room": "0x0"}:
                    errors.append(f"{tag}: root is not under its own Bootstrap Room span")
                ct = ra.get("gen_ai.usage.completion_tokens")
                if not (ct == r["output_tokens"] == ntok) or ra.get("gen_ai.usage.prompt_tokens") != r["prompt_tokens"]:
                    errors.append(f"{tag}: completion_tokens {ct}, truth {r['output_tokens']}, token times {ntok}")
                if json.loads(ra.get("gen_ai.response.finish_reasons", "null")) != [r["finish_reason"]["type"]]:
                    errors.append(f"{tag}: finish_reasons {ra.get('gen_ai.response.finish_reasons')}")
                e2e = ra.get("gen_ai.latency.e2e")
                if e2e is None or abs(e2e * 1e9 - (r["finished_ns"] - r["created_ns"])) > 1000:
                    errors.append(f"{tag}: e2e {e2e}")
                ttft = ra.get("gen_ai.latency.time_to_first_token")
                want = r.get("tokenizer_first_token_ns")
                if (ttft is None) != (want is None or want >= r["finished_ns"]):
                    errors.append(f"{tag}: time_to_first_token {ttft}, truth {want}")
                elif ttft is not None and abs(r["created_ns"] + ttft * 1e9 - want) > 1000:
                    errors.append(f"{tag}: root start + TTFT is off by {r['created_ns'] + ttft * 1e9 - want:.0f} ns")
            else:
                if root.get("parentSpanId") or ra != {"rid": r["rid"], "bootstrap_room": "None"}:
                    errors.append(f"{tag}: 0.5.3 root has a parent or attributes {sorted(ra)}")
        # tokenizer thread span and its two slices
        th = by_id.get(r["tokenizer_thread_span_id"])
        if th is None or th.get("parentSpanId") != r["root_span_id"] or th["name"] != r["tokenizer_thread_span_name"]:
            errors.append(f"{tag}: tokenizer thread span missing or misplaced")
        else:
            got = [(s["name"], *se(s)) for s in children[th["spanId"]]]
            want = [(x["name"], x["start_ns"], x["end_ns"]) for x in r["tokenizer_slices"]]
            if got != want or se(th) != (r["created_ns"], r["tokenizer_thread_end_ns"]):
                errors.append(f"{tag}: tokenizer slices {got}")
        prev_hop = r["tokenizer_slices"][-1]["span_id"]
        dc = r.get("dp_controller")
        if dc is not None:
            t = by_id.get(dc["thread_span_id"])
            kids = children[t["spanId"]] if t else []
            if t is None or t.get("parentSpanId") != r["root_span_id"] or len(kids) != 1 \
                    or kids[0]["spanId"] != dc["slice"]["span_id"] or links(kids[0]) != [prev_hop]:
                errors.append(f"{tag}: DP controller span missing or misplaced")
            prev_hop = dc["slice"]["span_id"]
        for sched in r["schedulers"]:
            rank = sched["scheduler"]
            stag = f"{tag}@{rank}"
            tid = sched["thread_span_id"]
            t = by_id.get(tid)
            if t is None:
                if tid not in never:
                    errors.append(f"{stag}: scheduler thread span missing")
            else:
                ta = attrs(t)
                if t.get("parentSpanId") != r["root_span_id"] or t["name"] != sched["thread_span_name"] \
                        or ta.get("tp_rank") != _tp_of(rank) or ta.get("pid") != sched["pid"] \
                        or ta.get("thread_label") != "Scheduler" or "dp_rank" in ta:
                    errors.append(f"{stag}: thread span name/attrs/parent")
                if sched["slices"] and int(t["endTimeUnixNano"]) != sched["slices"][-1]["end_ns"]:
                    errors.append(f"{stag}: thread span does not end with its last slice")
            kids = [s for s in spans if s.get("parentSpanId") == tid]
            kids.sort(key=lambda s: int(s["startTimeUnixNano"]))
            got = [(s["spanId"], s["name"], *se(s)) for s in kids]
            want = [(x["span_id"], x["name"], x["start_ns"], x["end_ns"]) for x in sched["slices"]]
            if got != want:
                errors.append(f"{stag}: slices differ ({len(got)} in file, {len(want)} in truth)")
                continue
            if sched["first_slice_links_to"] != prev_hop or (kids and links(kids[0]) != [prev_hop]):
                errors.append(f"{stag}: first slice does not link to the previous hop")
            for a, b in zip(kids, kids[1:]):
                if links(b) != [a["spanId"]]:
                    errors.append(f"{stag}: slice {b['name']} does not link to the one before")
                    break
            tok_slices = [x["end_ns"] for x in sched["slices"] if x["token"]]
            if tok_slices != [t["ns"] for t in sched["tokens"]]:
                errors.append(f"{stag}: token times are not the ends of the token slices")
            if r["root_exported"] and len(sched["tokens"]) != r["output_tokens"]:
                errors.append(f"{stag}: {len(sched['tokens'])} tokens, output {r['output_tokens']}")
            ends = {x["end_ns"] for x in sched["slices"]}
            if any(c["end_ns"] not in ends for c in sched["prefill_chunks"]):
                errors.append(f"{stag}: a prefill chunk ends where no slice does")
            evs = [(e, s) for s in kids for e in s.get("events", [])]
            if not v059 and evs:
                errors.append(f"{stag}: 0.5.3 slices carry events")
            if v059:
                ev_bids = set()
                for e, s in evs:
                    ea = attrs(e)
                    b = batches.get((rank, ea.get("bid")))
                    ev_bids.add(ea.get("bid"))
                    seen_bids.add((rank, ea.get("bid")))
                    if e["name"] != "schedule" or b is None:
                        errors.append(f"{stag}: event {e['name']} {ea} names no batch")
                    elif b["batch_size"] != ea["batch_size"] or r["rid"] not in b["members"] \
                            or int(e["timeUnixNano"]) != b["event_ns"][r["rid"]]:
                        errors.append(f"{stag}: batch {ea['bid']} size/members/time differ")
                    elif not se(s)[0] <= int(e["timeUnixNano"]) <= se(s)[1]:
                        errors.append(f"{stag}: event outside its slice")
                member_of = {b["bid"] for (rk, _), b in batches.items() if rk == rank and r["rid"] in b["members"]}
                if member_of != ev_bids:
                    errors.append(f"{stag}: {len(member_of - ev_bids)} batches without event, "
                                  f"{len(ev_bids - member_of)} events without batch")
    if v059:
        missing = {k for k in batches if k not in seen_bids}
        if missing or len(batches) != len(truth["batches"]):
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
        with open(os.path.join(d, "truth.json")) as f:
            rid_api = "call_sites" in json.load(f)
        bad += len(check_rid_api(d) if rid_api else check(d))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
