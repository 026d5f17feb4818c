"""Drives vLLM's own request-span code, without a GPU and without torch, and writes what it drove.

The frontend half is vLLM's: `OutputProcessor` (add_request, process_outputs, abort_requests, do_tracing),
`RequestState`, `RequestStateStats`, `IterationStats`, `ParentRequest`, `EngineCoreRequest`/`EngineCoreOutput(s)`/
`EngineCoreEvent`, the msgpack IPC codec (`vllm.v1.serial_utils`) and `vllm.tracing` (init_tracer, the OTLP exporter,
the BatchSpanProcessor, the `llm_request` span). The glue around it follows the installed version's
`AsyncLLM.add_request`, `AsyncLLM.abort`, `AsyncLLM.pause_generation` and `AsyncLLM.output_handler`.

The engine-core half (`MiniEngine` below) is this script's stand-in for `EngineCore` + `Scheduler`: it keeps a
waiting and a running queue with a token budget (chunked prefill), records QUEUED and SCHEDULED events with
`EngineCoreEvent.new_event` on `time.monotonic()` as the scheduler does, sleeps for the model's step time, and
sends `EngineCoreOutputs` (stamped by their own `__post_init__`) through the msgpack codec. No tokens are decoded:
the tokenizer is None, as with `skip_tokenizer_init`.

    python drive.py SCENARIO OUT_DIR ENDPOINT     (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL picks grpc or http/protobuf)

It writes OUT_DIR/truth.json. The spans leave through vLLM's exporter when the process exits (atexit shutdown of
the tracer provider, as in a vLLM server).
"""

import importlib.metadata
import inspect
import json
import os
import random
import sys
import time
from copy import copy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fakes  # noqa: E402

VERSION = importlib.metadata.version("vllm")

# Modules answered by fakes, per version: the smallest set with which the modules below import. Each cuts an import
# chain that ends in real torch (custom-op registration, CUDA graphs, model configs) or in a package the span code
# never calls (Hugging Face tokenizers, PIL, uvloop, py-cpuinfo, aiohttp).
STUBS = {
    "0.33.0": ["torch", "vllm.config", "vllm.multimodal", "vllm.compilation", "transformers", "tokenizers",
               "vllm.tokenizers", "uvloop", "cpuinfo"],
    "0.15.1": ["torch", "vllm.multimodal", "vllm.distributed", "transformers", "tokenizers", "vllm.tokenizers",
               "vllm.transformers_utils", "cpuinfo", "aiohttp"],
}
ALL_STUBS = sorted({m for v in STUBS.values() for m in v} | {"vllm.env_override"})
stubbed = STUBS.get(VERSION, ALL_STUBS)
fakes.install(stubbed, {"torch.__version__": "0.0.0+fake"}
              | ({"tokenizers.__version__": "0.0.0"} if "tokenizers" in stubbed else {}))

import vllm.tracing  # noqa: E402
import vllm.v1.engine as engine_types  # noqa: E402
from vllm.sampling_params import RequestOutputKind, SamplingParams  # noqa: E402
from vllm.utils import random_uuid  # noqa: E402
from vllm.v1.engine import (  # noqa: E402
    EngineCoreEvent,
    EngineCoreEventType,
    EngineCoreOutput,
    EngineCoreOutputs,
    EngineCoreRequest,
    FinishReason,
)
from vllm.v1.engine.output_processor import OutputProcessor, RequestOutputCollector  # noqa: E402
from vllm.v1.engine.parallel_sampling import ParentRequest  # noqa: E402
from vllm.v1.metrics.stats import IterationStats  # noqa: E402
from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder  # noqa: E402

REQUEST_FIELDS = set(EngineCoreRequest.__struct_fields__)
OUTPUT_FIELDS = set(EngineCoreOutput.__struct_fields__)
# 0.16+ routes the span through vllm.tracing.instrument_manual and OutputProcessor(tracing_enabled=...); up to 0.15
# AsyncLLM set OutputProcessor.tracer to the tracer init_tracer returned.
TRACING_FLAG = "tracing_enabled" in inspect.signature(OutputProcessor.__init__).parameters
# 0.33's pause_generation(mode="abort") aborts in the engine, which sends ABORT outputs; 0.15's aborts in the frontend.
ENGINE_SIDE_PAUSE = hasattr(engine_types, "PauseMode")
EOS = 2
BLOCK = 16


def ns(seconds):
    return int(seconds * 1e9)  # as vLLM turns arrival_time into the span's start


def opt_ns(seconds):
    return ns(seconds) if seconds else None


class Clock:
    """Maps engine monotonic seconds to epoch ns for truth.json (the frontend's wall clock is epoch already)."""

    def __init__(self):
        best = None
        for _ in range(50):
            a = time.monotonic()
            w = time.time()
            b = time.monotonic()
            if best is None or b - a < best[0]:
                best = (b - a, w - (a + b) / 2)
        self.offset = best[1]

    def epoch_ns(self, mono):
        return ns(mono + self.offset) if mono else None


class MiniEngine:
    """Stand-in for EngineCore + Scheduler: events, chunked prefill, one token per decode step."""

    def __init__(self, max_num_seqs, max_num_batched_tokens):
        self.max_num_seqs = max_num_seqs
        self.budget = max_num_batched_tokens
        self.decode_request = MsgpackDecoder(EngineCoreRequest)
        self.encoder = MsgpackEncoder()
        self.waiting = []
        self.running = []
        self.prefix_cache = []  # prompts of finished requests; hits are whole blocks of a common prefix
        self.plans = {}
        self.log = {}  # request id -> what the engine did, for truth.json
        self.steps = 0

    def add_request(self, frames, plan):
        req = self.decode_request.decode(frames)
        events = [EngineCoreEvent.new_event(EngineCoreEventType.QUEUED)]
        state = {"req": req, "computed": 0, "out": [], "events": events, "prefill_stats": None, "plan": plan}
        self.log[req.request_id] = {"queued": events[0].timestamp, "scheduled": None, "first_token": None,
                                    "last_token": None, "cached": 0, "generated": 0, "engine_finish": None,
                                    "abort_output": None}
        self.waiting.append(state)

    def has_work(self):
        return bool(self.waiting or self.running)

    def _cached_tokens(self, prompt):
        best = 0
        for other in self.prefix_cache:
            n = 0
            for a, b in zip(prompt, other):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        # Whole blocks only, and never the whole prompt: the last token is always computed.
        return min(best, len(prompt) - 1) // BLOCK * BLOCK

    def abort(self, request_ids):
        """EngineCore.abort_requests: finish_requests(FINISHED_ABORTED), no output is sent."""
        ids = set(request_ids)
        for queue in (self.waiting, self.running):
            for s in [s for s in queue if s["req"].request_id in ids]:
                queue.remove(s)
                self.log[s["req"].request_id]["engine_finish"] = "aborted (no output)"

    def pause_abort(self):
        """EngineCore pause_scheduler(mode="abort") in 0.33: every unfinished request gets an ABORT output."""
        reqs = self.waiting + self.running
        self.waiting, self.running = [], []
        ids = [s["req"].request_id for s in reqs]
        for i in ids:
            self.log[i]["engine_finish"] = "abort"
        outputs = [EngineCoreOutput(i, [], finish_reason=FinishReason.ABORT) for i in ids]
        eco = EngineCoreOutputs(finished_requests=ids, outputs=outputs)
        for i in ids:
            self.log[i]["abort_output"] = eco.timestamp
        return self.encoder.encode(eco)

    def step(self):
        scheduled_timestamp = time.monotonic()
        budget = self.budget
        batch = []
        for s in self.running:
            prompt_len = len(s["req"].prompt_token_ids)
            n = min(prompt_len - s["computed"], budget) if s["computed"] < prompt_len else 1
            if n <= 0:
                continue
            budget -= n
            batch.append((s, n))
        while self.waiting and len(self.running) < self.max_num_seqs and budget > 0:
            s = self.waiting.pop(0)
            req = s["req"]
            cached = self._cached_tokens(req.prompt_token_ids)
            s["computed"] = cached
            s["events"].append(EngineCoreEvent.new_event(EngineCoreEventType.SCHEDULED, scheduled_timestamp))
            log = self.log[req.request_id]
            log["scheduled"], log["cached"] = scheduled_timestamp, cached
            if "prefill_stats" in OUTPUT_FIELDS:
                from vllm.v1.metrics.stats import PrefillStats

                s["prefill_stats"] = PrefillStats()
                s["prefill_stats"].set(num_prompt_tokens=len(req.prompt_token_ids), num_local_cached_tokens=cached,
                                       num_external_cached_tokens=0)
            n = min(len(req.prompt_token_ids) - cached, budget)
            budget -= n
            self.running.append(s)
            batch.append((s, n))
        if not batch:
            return None
        # The model's step: a fixed cost, plus prefill tokens, plus decode rows.
        prefill = sum(n for s, n in batch if s["computed"] < len(s["req"].prompt_token_ids))
        rows = sum(1 for s, n in batch if s["computed"] >= len(s["req"].prompt_token_ids))
        time.sleep(0.006 + prefill * 12e-6 + rows * 1e-4)
        self.steps += 1
        outputs = []
        for s, n in batch:
            req = s["req"]
            prompt_len = len(req.prompt_token_ids)
            s["computed"] += n if s["computed"] < prompt_len else 1
            if s["computed"] < prompt_len:
                continue  # a partial prefill emits nothing; its events wait for the first token
            plan = s["plan"]
            max_tokens = req.sampling_params.max_tokens
            k = len(s["out"]) + 1
            finish = None
            if plan["stop"] == "eos" and k == plan["tokens"]:
                token, finish = EOS, FinishReason.STOP
            else:
                token = plan["rng"].randrange(100, 32000)
                if k >= max_tokens:
                    finish = FinishReason.LENGTH
            s["out"].append(token)
            extra = {}
            if len(s["out"]) == 1:
                if "prefill_stats" in OUTPUT_FIELDS:
                    stats = s["prefill_stats"]
                    stats.finalize(prompt_len // BLOCK * BLOCK)
                    extra["prefill_stats"] = stats
                elif "num_cached_tokens" in OUTPUT_FIELDS:
                    extra["num_cached_tokens"] = self.log[req.request_id]["cached"]
            events, s["events"] = (s["events"] or None), []
            outputs.append(EngineCoreOutput(request_id=req.request_id, new_token_ids=[token], finish_reason=finish,
                                            events=events, trace_headers=req.trace_headers, **extra))
            log = self.log[req.request_id]
            log["generated"] = len(s["out"])
            if finish is not None:
                log["engine_finish"] = str(finish)
                self.running.remove(s)
                self.prefix_cache.append(list(req.prompt_token_ids))
        eco = EngineCoreOutputs(outputs=outputs)
        for o in outputs:
            log = self.log[o.request_id]
            if log["first_token"] is None:
                log["first_token"] = eco.timestamp
            log["last_token"] = eco.timestamp
        return self.encoder.encode(eco)


class Frontend:
    """AsyncLLM's glue around the OutputProcessor, as in the installed version."""

    def __init__(self, endpoint, engine):
        if TRACING_FLAG:
            vllm.tracing.init_tracer("vllm.llm_engine", endpoint)
            self.processor = OutputProcessor(None, log_stats=True, tracing_enabled=True)
        else:
            tracer = vllm.tracing.init_tracer("vllm.llm_engine", endpoint)
            self.processor = OutputProcessor(None, log_stats=True)
            self.processor.tracer = tracer
        self.engine = engine
        self.encoder = MsgpackEncoder()
        self.decode_outputs = MsgpackDecoder(EngineCoreOutputs)
        self.queues = {}
        self.seen = {}  # internal id -> frontend wall times and finish reason, for truth.json

    def add_request(self, external_id, prompt, params, trace_headers, plans):
        arrival = time.time()
        fields = dict(request_id=external_id, prompt_token_ids=prompt, mm_features=None, sampling_params=params,
                      pooling_params=None, eos_token_id=EOS, arrival_time=arrival, lora_request=None, cache_salt=None,
                      data_parallel_rank=None, trace_headers=trace_headers)
        request = EngineCoreRequest(**{k: v for k, v in fields.items() if k in REQUEST_FIELDS})
        # InputProcessor.assign_request_id
        request.external_req_id = request.request_id
        request.request_id = f"{request.external_req_id}-{random_uuid():.8}"
        queue = RequestOutputCollector(params.output_kind, request.request_id)
        self.queues[request.request_id] = queue
        if params.n == 1:
            children = [(request, None, 0)]
        else:
            parent = ParentRequest(request)
            children = []
            for idx in range(params.n):
                child_id, child_params = parent.get_child_info(idx)
                child = request if idx == params.n - 1 else copy(request)
                child.request_id = child_id
                child.sampling_params = child_params
                children.append((child, parent, idx))
        for child, parent, idx in children:
            self.processor.add_request(child, None, parent, idx, queue)
        for (child, _, idx), plan in zip(children, plans):
            self.seen[child.request_id] = {"external": external_id, "arrival_time": arrival, "index": idx,
                                           "frontend_first_output": None, "frontend_final_output": None,
                                           "finish_reason": None}
            self.engine.add_request(self.encoder.encode(child), plan)
        return [c.request_id for c, _, _ in children]

    def abort(self, external_id):
        """AsyncLLM.abort(request_id, internal=False): the frontend forgets the request, then tells the engine."""
        ids = self.processor.abort_requests([external_id], internal=False)
        self.engine.abort(ids)
        for i in ids:
            self.seen[i]["finish_reason"] = "abort (client)"

    def pause_abort(self):
        """AsyncLLM.pause_generation() in its default, aborting mode."""
        if ENGINE_SIDE_PAUSE:
            self.handle(self.engine.pause_abort())
        else:
            ids = list(self.processor.request_states.keys())
            ids = self.processor.abort_requests(ids, internal=True)
            self.engine.abort(ids)
            for i in ids:
                self.seen[i]["finish_reason"] = "abort (pause, in the frontend)"

    def handle(self, frames):
        """One pass of AsyncLLM.output_handler."""
        outputs = self.decode_outputs.decode(frames)
        iteration_stats = IterationStats() if outputs.outputs else None
        if not outputs.outputs:
            return
        for o in outputs.outputs:
            seen = self.seen.get(o.request_id)
            if seen is None or o.request_id not in self.processor.request_states:
                continue
            if seen["frontend_first_output"] is None:
                seen["frontend_first_output"] = iteration_stats.iteration_timestamp
            if o.finish_reason is not None:
                seen["frontend_final_output"] = iteration_stats.iteration_timestamp
                seen["finish_reason"] = str(o.finish_reason)
        processed = self.processor.process_outputs(outputs.outputs, outputs.timestamp, iteration_stats)
        if processed.reqs_to_abort:
            self.engine.abort(processed.reqs_to_abort)
        for queue in self.queues.values():
            while queue.get_nowait() is not None:
                pass


def sampling(max_tokens, temperature, top_p=1.0, n=1, stream=True):
    kind = RequestOutputKind.DELTA if stream else RequestOutputKind.FINAL_ONLY
    return SamplingParams(n=n, max_tokens=max_tokens, temperature=temperature, top_p=top_p, output_kind=kind,
                          detokenize=False)


def scenario(name, rng):
    """(engine limits, timed actions). Each request: id, prompt, params, trace headers, per-sequence plans."""

    def prompt(n, prefix=()):
        return list(prefix) + [rng.randrange(100, 32000) for _ in range(n - len(prefix))]

    def req(at, kind, prompt_ids, params, plans, traceparent=False, role=""):
        rid = f"{kind}-{random_uuid()}"
        headers = None
        if traceparent:
            headers = {"traceparent": f"00-{rng.getrandbits(128):032x}-{rng.getrandbits(64):016x}-01"}
        plans = [dict(p, rng=random.Random(rng.random())) for p in plans]
        return (at, "add", dict(id=rid, prompt=prompt_ids, params=params, headers=headers, plans=plans, role=role))

    if name == "stream_eos":
        return (8, 2048), [
            req(0.0, "chatcmpl", prompt(37), sampling(256, 0.7, 0.95), [{"tokens": 12, "stop": "eos"}],
                traceparent=True, role="streaming chat request that ends on EOS; carries a W3C traceparent"),
        ]
    if name == "length":
        return (8, 2048), [
            req(0.0, "cmpl", prompt(120), sampling(16, 0.0, stream=False), [{"tokens": 16, "stop": "length"}],
                role="non-streaming greedy request that stops at max_tokens=16"),
        ]
    if name == "long_prompt":
        return (8, 2048), [
            req(0.0, "chatcmpl", prompt(5000), sampling(64, 1.0), [{"tokens": 20, "stop": "eos"}],
                role="5000-token prompt, prefilled in chunks of the 2048-token budget over 3 steps"),
            req(0.010, "chatcmpl", prompt(64), sampling(32, 0.7), [{"tokens": 8, "stop": "eos"}],
                role="short request arriving during the long prefill; waits for budget"),
        ]
    if name == "abort":
        return (2, 2048), [
            req(0.0, "chatcmpl", prompt(20), sampling(4, 0.7), [{"tokens": 4, "stop": "length"}],
                role="finishes normally before the aborts"),
            req(0.0, "chatcmpl", prompt(50), sampling(200, 0.7), [{"tokens": 200, "stop": "length"}],
                role="aborted by the client (AsyncLLM.abort) at 60 ms while decoding"),
            req(0.0, "chatcmpl", prompt(40), sampling(200, 0.7), [{"tokens": 200, "stop": "length"}],
                role="decoding when the server pauses with mode=abort at 150 ms"),
            req(0.030, "chatcmpl", prompt(30), sampling(200, 0.7), [{"tokens": 200, "stop": "length"}],
                role="waits for a seat (max_num_seqs=2), then decoding when the server pauses"),
            req(0.090, "chatcmpl", prompt(30), sampling(200, 0.7), [{"tokens": 200, "stop": "length"}],
                role="still waiting (never scheduled) when the server pauses"),
            (0.060, "client_abort", 1),
            (0.150, "pause_abort", None),
        ]
    if name == "prefix_cache":
        shared = prompt(512)
        return (8, 2048), [
            req(0.0, "cmpl", prompt(560, shared), sampling(8, 0.0, stream=False), [{"tokens": 8, "stop": "length"}],
                role="first request with a 512-token system prefix: no cache hit"),
            req(0.150, "cmpl", prompt(592, shared), sampling(8, 0.0, stream=False), [{"tokens": 8, "stop": "length"}],
                role="same 512-token prefix after the first finished: 512 prompt tokens from the prefix cache"),
        ]
    if name == "parallel_n2":
        return (8, 2048), [
            req(0.0, "cmpl", prompt(25), sampling(10, 0.8, 0.9, n=2, stream=False),
                [{"tokens": 10, "stop": "length"}, {"tokens": 6, "stop": "eos"}],
                role="n=2: two child requests in the engine, one span each"),
        ]
    raise SystemExit(f"unknown scenario {name}")


def main():
    name, out, endpoint = sys.argv[1:4]
    rng = random.Random(f"tokenscope-{name}")
    (max_seqs, budget), actions = scenario(name, rng)
    clock = Clock()
    engine = MiniEngine(max_seqs, budget)
    frontend = Frontend(endpoint, engine)
    added = []
    start = time.monotonic()
    pending = sorted(actions, key=lambda a: a[0])
    while pending or engine.has_work():
        now = time.monotonic() - start
        while pending and pending[0][0] <= now:
            at, kind, arg = pending.pop(0)
            if kind == "add":
                ids = frontend.add_request(arg["id"], arg["prompt"], arg["params"], arg["headers"], arg["plans"])
                added.append((arg, ids))
            elif kind == "client_abort":
                frontend.abort(added[arg][0]["id"])
            elif kind == "pause_abort":
                frontend.pause_abort()
        if engine.has_work():
            frames = engine.step()
            if frames is not None:
                time.sleep(0.0004)  # engine process -> ZMQ -> API server
                frontend.handle(frames)
        elif pending:
            time.sleep(max(0.0, pending[0][0] - (time.monotonic() - start)))

    requests = []
    for arg, ids in added:
        params = arg["params"]
        for rid in ids:
            seen, log = frontend.seen[rid], engine.log[rid]
            arrival = seen["arrival_time"]
            finish = seen["finish_reason"]
            span = finish is not None and not finish.startswith("abort (")
            requests.append({
                "request_id": arg["id"],
                "engine_request_id": rid,
                "role": arg["role"],
                "stream": params.output_kind == RequestOutputKind.DELTA,
                "n": params.n,
                "index": seen["index"],
                "prompt_tokens": len(arg["prompt"]),
                "cached_prompt_tokens": log["cached"],
                "completion_tokens": log["generated"],
                "max_tokens": params.max_tokens,
                "temperature": params.temperature,
                "top_p": params.top_p,
                "trace_headers": arg["headers"],
                "finish_reason": finish,
                "engine_finish": log["engine_finish"],
                "span_expected": span,
                "arrival_time_s": arrival,
                "arrival_ns": ns(arrival),
                "queued_ns": clock.epoch_ns(log["queued"]),
                "scheduled_ns": clock.epoch_ns(log["scheduled"]),
                "first_token_ns": clock.epoch_ns(log["first_token"]),
                "last_token_ns": clock.epoch_ns(log["last_token"]),
                "abort_output_ns": clock.epoch_ns(log["abort_output"]),
                "frontend_first_output_ns": opt_ns(seen["frontend_first_output"]),
                "frontend_final_output_ns": opt_ns(seen["frontend_final_output"]),
            })
    truth = {
        "vllm_version": VERSION,
        "scenario": name,
        "protocol": os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
        "endpoint": endpoint,
        "pid": os.getpid(),
        "stubbed_modules": stubbed,
        "engine": {"max_num_seqs": max_seqs, "max_num_batched_tokens": budget, "block_size": BLOCK, "eos_token_id": EOS,
                   "steps": engine.steps},
        "clocks": "arrival_* and frontend_* are the API server's time.time() (frontend_* is the "
                  "IterationStats.iteration_timestamp of the output batch that carried the request's first and last "
                  "output); queued, scheduled, first_token, last_token and abort_output are the engine's "
                  "time.monotonic() mapped to epoch with monotonic_to_epoch_offset_s",
        "monotonic_to_epoch_offset_s": clock.offset,
        "requests": requests,
    }
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
