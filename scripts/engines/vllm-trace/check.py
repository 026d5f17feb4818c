"""Checks each scenario's spans.jsonl against its truth.json and prints one line per span.

    python check.py DIR...        (each DIR holds spans.jsonl and truth.json; exit status 1 on a mismatch)

What it holds vLLM's span to, per request that should have one (a client abort leaves none):
start = int(arrival_time * 1e9) exactly; time_to_first_token and e2e = the frontend iteration timestamps of the first
and last output batch minus arrival; time_in_queue = scheduled - queued, prefill = first output - scheduled, decode
= last output - first output, inference = last output - scheduled, on the engine clock (for a request aborted
before it was scheduled, queued and scheduled are 0, so prefill and inference are the raw monotonic time of the
abort); usage and request attributes as driven; end >= start + e2e.
"""

import json
import os
import sys

TOL = 2e-6  # seconds; the engine clock is mapped to epoch through one offset


def spans_of(path):
    out = []
    with open(path) as f:
        for line in f:
            for rs in json.loads(line)["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    out.extend(ss["spans"])
    return out


def value(v):
    if "intValue" in v:
        return int(v["intValue"])
    return next(iter(v.values()))


def check(folder):
    truth = json.load(open(os.path.join(folder, "truth.json")))
    spans = spans_of(os.path.join(folder, "spans.jsonl"))
    offset = truth["monotonic_to_epoch_offset_s"]
    expected = [r for r in truth["requests"] if r["span_expected"]]
    bad = []
    if len(spans) != len(expected):
        bad.append(f"{len(spans)} spans for {len(expected)} expected")
    unmatched = list(expected)
    for span in spans:
        attrs = {a["key"]: value(a["value"]) for a in span["attributes"]}
        rid = attrs.get("gen_ai.request.id")
        cands = [r for r in unmatched if r["request_id"] == rid
                 and r["completion_tokens"] == attrs["gen_ai.usage.completion_tokens"]]
        if not cands:
            bad.append(f"span {span['spanId']} ({rid}) matches no request")
            continue
        r = cands[0]
        unmatched.remove(r)
        problems = []

        def near(key, want):
            got = attrs.get(key)
            if got is None or abs(got - want) > TOL:
                problems.append(f"{key}={got} want {want:.9f}")

        arrival = r["arrival_time_s"]
        start = int(span["startTimeUnixNano"])
        if start != int(arrival * 1e9):
            problems.append(f"start {start} != int(arrival*1e9)")
        near("gen_ai.latency.time_to_first_token", (r["frontend_first_output_ns"] - r["arrival_ns"]) / 1e9)
        near("gen_ai.latency.e2e", (r["frontend_final_output_ns"] - r["arrival_ns"]) / 1e9)
        last = r["abort_output_ns"] or r["last_token_ns"]
        first = r["first_token_ns"] or r["abort_output_ns"]
        if r["scheduled_ns"] is None:
            mono = r["abort_output_ns"] / 1e9 - offset
            near("gen_ai.latency.time_in_queue", 0.0)
            near("gen_ai.latency.time_in_model_prefill", mono)
            near("gen_ai.latency.time_in_model_inference", mono)
        else:
            near("gen_ai.latency.time_in_queue", (r["scheduled_ns"] - r["queued_ns"]) / 1e9)
            near("gen_ai.latency.time_in_model_prefill", (first - r["scheduled_ns"]) / 1e9)
            near("gen_ai.latency.time_in_model_inference", (last - r["scheduled_ns"]) / 1e9)
        near("gen_ai.latency.time_in_model_decode", (last - first) / 1e9)
        for key, want in [("gen_ai.usage.prompt_tokens", r["prompt_tokens"]),
                          ("gen_ai.request.max_tokens", r["max_tokens"]),
                          ("gen_ai.request.top_p", r["top_p"]),
                          ("gen_ai.request.temperature", r["temperature"] or None),
                          ("gen_ai.request.n", 1)]:
            if attrs.get(key) != want:
                problems.append(f"{key}={attrs.get(key)} want {want}")
        end = int(span["endTimeUnixNano"])
        lag = end - start - attrs["gen_ai.latency.e2e"] * 1e9
        if lag < -1000:
            problems.append(f"end {lag / 1e3:.1f} us before start + e2e")
        status = "ok" if not problems else "MISMATCH " + "; ".join(problems)
        print(f"  {rid} [{r['finish_reason']}] end - (start + e2e) = {lag / 1e3:.0f} us: {status}")
        bad.extend(problems)
    return bad


def main():
    failed = False
    for folder in sys.argv[1:]:
        print(folder)
        bad = check(folder)
        if bad:
            failed = True
            for b in bad:
                print("  !", b)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
