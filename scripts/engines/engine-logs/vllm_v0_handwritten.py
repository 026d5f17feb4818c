"""Writes tests/data/import/vllm/logs/v0-0.6.log (+ .truth.json): a HAND-WRITTEN fixture of the
V0-engine (vLLM 0.6.x-0.7.x) stats lines. No V0 vLLM is installed here; unlike the other
fixtures, nothing of vLLM runs. The lines are formatted with the format strings quoted in
tests/data/import/vllm/logs/README.md ("vLLM V0"), which come from a stored copy of
vllm/engine/metrics.py (LoggingStatLogger.log) of that era, and with the V0 logging format
"%(levelname)s %(asctime)s %(filename)s:%(lineno)d] %(message)s" (datefmt "%m-%d %H:%M:%S", no
process prefix: V0 ran the engine in the API-server process). The metrics.py line numbers are
illustrative (they differ between releases: 341, 345, 396, 406, 411, 449 and 486 are all seen
in the wild); a parser must not depend on them.

    python3 vllm_v0_handwritten.py OUT_BASE
"""

import json
import sys
import time

OUT = sys.argv[1]
START = 1729000800.0  # 2024-10-15 14:00:00 UTC


def ts(t):
    return time.strftime("%m-%d %H:%M:%S", time.gmtime(t))


def line(t, level, fileinfo, msg):
    return f"{level} {ts(t)} {fileinfo}] {msg}\n"


STATS = ("Avg prompt throughput: %.1f tokens/s, "
         "Avg generation throughput: %.1f tokens/s, "
         "Running: %d reqs, Swapped: %d reqs, "
         "Pending: %d reqs, GPU KV cache usage: %.1f%%, "
         "CPU KV cache usage: %.1f%%.")
PREFIX = "Prefix cache hit rate: GPU: %.2f%%, CPU: %.2f%%"
SPEC = ("Speculative metrics: "
        "Draft acceptance rate: {:.3f}, "
        "System efficiency: {:.3f}, "
        "Number of speculative tokens: {}, "
        "Number of accepted tokens: {}, "
        "Number of draft tokens: {}, "
        "Number of emitted tokens: {}.")

out = []
truth = []
t = START
out.append(line(t, "INFO", "api_server.py:528", "vLLM API server version 0.6.3.post1"))
out.append(line(t, "INFO", "llm_engine.py:237", "Initializing an LLM engine (v0.6.3.post1) with config: "
                "model='meta-llama/Llama-3.1-8B-Instruct', speculative_config=None, "
                "tokenizer='meta-llama/Llama-3.1-8B-Instruct', dtype=torch.bfloat16, max_seq_len=131072, "
                "enable_prefix_caching=True"))
t += 31.0
out.append("INFO:     Started server process [1234]\n")
out.append("INFO:     Waiting for application startup.\n")
out.append("INFO:     Application startup complete.\n")
out.append("INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)\n")

# (seconds since previous line, prompt tokens, gen tokens, running, swapped, pending, gpu kv, cpu kv,
#  gpu prefix hit rate, cpu prefix hit rate, spec)
plan = [
    (5.2, 6123, 210, 4, 0, 0, 0.031, 0.0, 0.0, 0.0, None),
    (5.1, 0, 1840, 4, 0, 0, 0.052, 0.0, 0.0, 0.0, None),
    (5.3, 20480, 1502, 38, 0, 6, 0.684, 0.0, 0.1342, 0.0, None),
    (5.0, 4096, 3310, 52, 3, 11, 0.991, 0.012, 0.1502, 0.0, None),
    (5.4, 0, 902, 2, 0, 0, 0.044, 0.0, 0.1502, 0.0, None),
    (10.0, 0, 0, 0, 0, 0, 0.0, 0.0, 0.1502, 0.0, None),  # printed: the previous interval was not idle
    (10.0, 0, 0, 0, 0, 0, 0.0, 0.0, 0.1502, 0.0, "idle"),  # idle twice in a row: DEBUG, not printed
    (5.2, 1021, 96, 1, 0, 0, 0.012, 0.0, 0.1877, 0.0, (0.712, 0.654, 3, 612, 860, 930)),
]
for i, (dt, p, g, run, sw, pend, gkv, ckv, ghit, chit, extra) in enumerate(plan):
    t += dt
    if i == 2:
        out.append('INFO:     127.0.0.1:41234 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n')
        truth.append({"kind": "access", "method": "POST", "path": "/v1/chat/completions", "status": 200,
                      "log_line": len(out)})
    pt, gt = p / dt, g / dt
    emitted = extra != "idle"
    row = {"kind": "stats_v0", "emitted": emitted, "time_epoch": t, "time_printed": ts(t), "interval_s": dt,
           "prompt_tokens": p, "generation_tokens": g, "prompt_throughput": pt, "generation_throughput": gt,
           "running": run, "swapped": sw, "pending": pend, "gpu_kv_cache_usage": gkv, "cpu_kv_cache_usage": ckv}
    if emitted:
        out.append(line(t, "INFO", "metrics.py:345", STATS % (pt, gt, run, sw, pend, gkv * 100, ckv * 100)))
        row["log_line"] = len(out)
    truth.append(row)
    if emitted:
        # enable_prefix_caching=True: the hit-rate line follows every stats line
        out.append(line(t, "INFO", "metrics.py:361", PREFIX % (ghit * 100, chit * 100)))
        truth.append({"kind": "prefix_v0", "time_printed": ts(t), "gpu_prefix_cache_hit_rate": ghit,
                      "cpu_prefix_cache_hit_rate": chit, "log_line": len(out)})
    if isinstance(extra, tuple):
        acc_rate, eff, k, acc, draft, emitted_tokens = extra
        out.append(line(t, "INFO", "metrics.py:367", SPEC.format(acc_rate, eff, k, acc, draft, emitted_tokens)))
        truth.append({"kind": "spec_v0", "time_printed": ts(t), "draft_acceptance_rate": acc_rate,
                      "system_efficiency": eff, "num_spec_tokens": k, "accepted_tokens": acc,
                      "draft_tokens": draft, "emitted_tokens": emitted_tokens, "log_line": len(out)})
    if i == 4:
        out.append('INFO:     127.0.0.1:41236 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n')
        truth.append({"kind": "access", "method": "POST", "path": "/v1/chat/completions", "status": 200,
                      "log_line": len(out)})

with open(OUT + ".log", "w", encoding="utf-8", newline="") as f:
    f.write("".join(out))
with open(OUT + ".truth.json", "w", encoding="utf-8") as f:
    json.dump({"engine": "vllm", "version": "0.6.x (V0 engine, hand-written)", "scenario": "single",
               "timezone": "UTC", "hand_written": True, "log_stats_interval_s": 5.0,
               "units": {"gpu_kv_cache_usage": "fraction 0..1 (printed as percent %.1f%%)",
                         "gpu_prefix_cache_hit_rate": "fraction 0..1 (printed as percent %.2f%%)",
                         "draft_acceptance_rate": "fraction 0..1 (printed %.3f, NOT a percent)"},
               "lines": truth}, f, indent=1)
    f.write("\n")
