#!/usr/bin/env python3
"""Drive SGLang 0.5.3-0.5.9's request tracing (``--enable-trace``) without a GPU.

These releases trace with ``sglang/srt/tracing/trace.py``: module-level functions
keyed by rid (``trace_req_start``, ``trace_slice_start/_end``, ``trace_slice_batch``,
``trace_req_finish``, 0.5.9 also ``trace_event_batch``), a per-process dict of
request contexts, and a trace context that travels in
``TokenizedGenerateReqInput.trace_context`` (a dict: W3C ``traceparent`` of the
root span + the ids of the sender's last slice). 0.5.10 replaced all of it
(``observability/trace.py``, driven by drive.py).

The tracing module that runs is the installed wheel's, unchanged (sgl_stubs.py,
``load_rid_api``). The server around it is server_model.py's, shared with
drive.py (0.5.10+): a tokenizer (main process), one scheduler process per rank
(and, for --dp-size 2, a DP controller), started with ``multiprocessing`` spawn,
each calling ``process_tracing_init(endpoint, "sglang")`` and
``trace_set_thread_info`` as the process entry points do; a scheduler model with
a waiting queue, chunked prefill, mixed chunks, retraction, aborts and the two
event loops (overlap, the default, and normal for --disable-overlap-schedule); a
model forward pass that is a sleep on a simulated GPU timeline. This file makes
the tracing calls of these releases in it.

Which release's call sites are reproduced is decided by reading the installed
wheel: the call sites below must be present verbatim in its source, or the run
stops. Calls as made (file: call, where):

  both releases
    tokenizer_manager.generate_request   trace_req_start(rid, None, ts=int(created_time*1e9)
                                         [, role=..., external_trace_header=...]) and
                                         trace_slice_start("", rid, ts=..., anonymous=True)
    tokenizer_manager._tokenize_one_request   trace_slice_end(<tokenize>, rid)
    tokenizer_manager._send_one_request  trace_slice_start(<dispatch>, rid);
                                         trace_get_proc_propagate_context(rid); send;
                                         trace_slice_end(<dispatch>, rid, thread_finish_flag=True)
    scheduler.recv_requests              (every TP rank, after the broadcast)
                                         trace_set_proc_propagate_context(rid, ctx);
                                         trace_slice_start("", rid, anonymous=True)
    scheduler._add_request_to_queue      trace_slice_end(<process req>, rid, auto_next_anon=True)
                                         (also for a retracted request)
    scheduler.process_batch_result       decode: trace_slice_batch(<decode loop>, batch.reqs)
                                         after process_batch_result_decode
    tokenizer_manager._handle_batch_output   trace_req_finish(rid, ts=int(finished_time*1e9)
                                         [, attrs=convert_to_span_attrs(...)])
    tokenizer_manager._handle_abort_req  nothing (a request aborted in the waiting queue
                                         never ends its root span)
  0.5.3 only
    scheduler.process_batch_result       extend: trace_slice_batch("prefill", batch.reqs)
                                         after process_batch_result_prefill (every member,
                                         middle chunks included)
    data_parallel_controller             nothing: trace_context passes through unchanged
  0.5.9 only
    scheduler.get_next_batch_to_run      trace_event_batch("schedule", ret.reqs)
    process_batch_result_prefill         per request in the loop: trace_slice(PREFILL_FORWARD,
                                         auto_next_anon=not finished, thread_finish_flag=finished)
                                         or, for a middle chunk, trace_slice(PREFILL_CHUNKED_FORWARD,
                                         auto_next_anon=True)
    data_parallel_controller.dispatching_with_trace
                                         trace_set_proc_propagate_context, trace_slice_start(
                                         DC_DISPATCH), trace_get_proc_propagate_context, send,
                                         trace_slice_end(DC_DISPATCH, thread_finish_flag=True)
    tokenizer: process_tracing_init picks the gRPC or HTTP exporter from
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL (0.5.3 always uses gRPC).

SGLang takes most of these times itself (``time.time_ns()`` inside trace.py), so
truth.json reads the times it used back from the span objects trace.py created
(start/end of each slice it ended), next to what the model did (which batch gave
which request a token, chunks, batches). See the notes in truth.json.

Usage: drive_053.py --scenario NAME --out DIR   (run with the venv's python; see make.sh)
"""

from __future__ import annotations

import contextvars
import enum
import gc
import importlib.metadata
import inspect
import json
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import server_model as model  # noqa: E402
import sgl_stubs  # noqa: E402
from server_model import MODEL_NAME, OutRec, ReqPlan, Scenario, SimReq, TokenizedReq, flush_tracing  # noqa: E402

# Every process (the spawned ones re-import this file) loads the same modules.
trace_mod, _sb = sgl_stubs.load_rid_api()
FINISH_ABORT, FINISH_LENGTH, FINISH_MATCHED_TOKEN = _sb.FINISH_ABORT, _sb.FINISH_LENGTH, _sb.FINISH_MATCHED_TOKEN

SGLANG_VERSION = importlib.metadata.version("sglang")


def _read(rel: str) -> str:
    with open(sgl_stubs.src(rel), encoding="utf-8") as f:
        return f.read()


_SCHED_SRC = _read("srt/managers/scheduler.py")
_OUT_SRC = _read("srt/managers/scheduler_output_processor_mixin.py")
_TM_SRC = _read("srt/managers/tokenizer_manager.py")
_DPC_SRC = _read("srt/managers/data_parallel_controller.py")


def _need(src: str, snippet: str, where: str) -> None:
    if snippet not in src:
        raise SystemExit(
            f"sglang {SGLANG_VERSION}: call site {snippet!r} not found in {where}; "
            "drive_053.py reproduces the call sites of 0.5.3 and 0.5.9 only"
        )


# --- which release's call sites (checked against the wheel) -------------------
if 'trace_slice_batch("decode loop", batch.reqs)' in _SCHED_SRC:
    CALLS = "0.5.3"
    for s in ('trace_slice_batch("prefill", batch.reqs)',
              'trace_slice_end("process req", req.rid, auto_next_anon=True)',
              "trace_set_proc_propagate_context(req.rid, req.trace_context)",
              'trace_slice_start("", req.rid, anonymous=True)'):
        _need(_SCHED_SRC, s, "managers/scheduler.py")
    for s in ('trace_slice_end("tokenize", obj.rid)',
              'trace_slice_start("dispatch", obj.rid)',
              "tokenized_obj.trace_context = trace_get_proc_propagate_context(obj.rid)",
              'trace_slice_end("dispatch", obj.rid, thread_finish_flag=True)',
              "trace_req_finish(rid, ts=int(state.finished_time * 1e9))"):
        _need(_TM_SRC, s, "managers/tokenizer_manager.py")
    if "trace_" in _DPC_SRC.replace("traceback", ""):
        raise SystemExit("0.5.3-style wheel whose DP controller traces: not modelled")
    STAGE = {
        "tokenize": "tokenize",
        "dispatch": "dispatch",
        "request_process": "process req",
        "prefill": "prefill",
        "decode": "decode loop",
    }
elif "trace_slice_batch(RequestStage.DECODE_LOOP, batch.reqs)" in _SCHED_SRC:
    CALLS = "0.5.9"
    for s in ('trace_event_batch("schedule", ret.reqs)',
              "trace_slice_end(RequestStage.REQUEST_PROCESS, req.rid, auto_next_anon=True)",
              "trace_set_proc_propagate_context(req.rid, req.trace_context)",
              'trace_slice_start("", req.rid, anonymous=True)'):
        _need(_SCHED_SRC, s, "managers/scheduler.py")
    for s in ("RequestStage.PREFILL_FORWARD,", "RequestStage.PREFILL_CHUNKED_FORWARD,",
              "if req.finished() or req.is_retracted:"):
        _need(_OUT_SRC, s, "managers/scheduler_output_processor_mixin.py")
    for s in ("trace_slice_end(RequestStage.TOKENIZE, obj.rid)",
              "trace_slice_start(RequestStage.TOKENIZER_DISPATCH, obj.rid)",
              "attrs=self.convert_to_span_attrs(state, recv_obj, i)"):
        _need(_TM_SRC, s, "managers/tokenizer_manager.py")
    for s in ("trace_slice_start(RequestStage.DC_DISPATCH, req.rid)",
              "trace_slice_end(RequestStage.DC_DISPATCH, req.rid, thread_finish_flag=True)"):
        _need(_DPC_SRC, s, "managers/data_parallel_controller.py")
    _RS = _sb.RequestStage
    STAGE = {  # the enum members themselves, as the call sites pass them
        "tokenize": _RS.TOKENIZE,
        "dispatch": _RS.TOKENIZER_DISPATCH,
        "dc_dispatch": _RS.DC_DISPATCH,
        "request_process": _RS.REQUEST_PROCESS,
        "prefill": _RS.PREFILL_FORWARD,
        "chunk": _RS.PREFILL_CHUNKED_FORWARD,
        "decode": _RS.DECODE_LOOP,
    }
else:
    raise SystemExit(f"sglang {SGLANG_VERSION}: no tracing call sites this driver knows")

PER_REQ_PREFILL_SLICES = CALLS == "0.5.9"  # else one trace_slice_batch("prefill") after the loop
SCHEDULE_EVENTS = CALLS == "0.5.9"
DPC_TRACES = CALLS == "0.5.9"
HTTP_EXPORTER = hasattr(trace_mod, "get_otlp_span_exporter")  # 0.5.3: gRPC only
REQ_START_ROLE = "role" in inspect.signature(trace_mod.trace_req_start).parameters
WAITING_ABORT_MESSAGE = "Abort before prefill" if CALLS == "0.5.3" else "Abort in waiting queue"
del _SCHED_SRC, _OUT_SRC, _DPC_SRC

if CALLS == "0.5.9":
    convert_to_span_attrs = sgl_stubs.extract(
        "srt/managers/tokenizer_manager.py",
        "TokenizerManager.convert_to_span_attrs",
        {"SpanAttributes": trace_mod.SpanAttributes, "json": json},
    )
else:
    convert_to_span_attrs = None
del _TM_SRC


# --- looking at what trace.py holds (for truth.json only) ----------------------


def _thread_ctx(rid: str):
    ctx = trace_mod.reqs_context.get(str(rid))
    if ctx is None:
        return None
    return ctx.threads_context.get(threading.get_native_id())


def open_slice(rid: str):
    """The span of the slice trace.py has open for rid on this thread (or None)."""
    tc = _thread_ctx(rid)
    if tc is None or not tc.cur_slice_stack:
        return None
    return tc.cur_slice_stack[-1].span


def span_id(span) -> str:
    return f"{span.get_span_context().span_id:016x}"


def span_name(span) -> str:
    n = span.name
    return n.value if isinstance(n, enum.Enum) else n


def slice_rec(span, **extra) -> dict:
    d = {"name": span_name(span), "span_id": span_id(span),
         "start_ns": span.start_time, "end_ns": span.end_time}
    d.update(extra)
    return d


# --- scenarios: server_model's, as these releases' truth.json words them ------


SCENARIOS = model.scenarios(
    about={
        "no-overlap": "same requests with --disable-overlap-schedule; OTLP/HTTP where the "
                      "release can (0.5.9), gRPC in 0.5.3",
        "dp2": "--dp-size 2: a DP controller process and two scheduler processes, "
               "requests dispatched round robin; OTLP/HTTP where the release can",
        "tp2": "--tp-size 2: two scheduler processes (TP 0, TP 1) that run the same "
               "batches; each traces every request",
    },
    extra=[
        Scenario("metrics",
                 "same requests as overlap with --enable-metrics (the tokenizer stamps "
                 "first_token_time, so 0.5.9's roots get TTFT/prefill/decode latencies)",
                 model.three(), overlap=True, protocol="grpc", metrics=True),
    ],
)


def protocol_of(sc: Scenario) -> str:
    return sc.protocol if HTTP_EXPORTER else "grpc"


def init_tracing(endpoint: str, label: str, tp=None, dp=None) -> None:
    # run_scheduler_process / launch_server / run_data_parallel_controller_process
    trace_mod.process_tracing_init(endpoint, "sglang")
    if tp is None and dp is None:
        trace_mod.trace_set_thread_info(label)
    else:
        trace_mod.trace_set_thread_info(label, tp, dp)


_PERF_TO_EPOCH_NS = time.time_ns() - int(time.perf_counter() * 1e9)


def perf_ns(t: float) -> int:
    """A perf_counter stamp on the epoch clock (simulated GPU times; approximate)."""
    return int(t * 1e9) + _PERF_TO_EPOCH_NS


# --- the scheduler: server_model's, with these releases' tracing calls -------


class Scheduler(model.Scheduler):
    FINISH_ABORT, FINISH_LENGTH, FINISH_MATCHED_TOKEN = FINISH_ABORT, FINISH_LENGTH, FINISH_MATCHED_TOKEN
    # neither 0.5.3 nor 0.5.9 leaves out of a batch the requests whose queued result finishes them
    # (_reqs_finishing_inflight came later)
    SKIP_FINISHING_DECODE = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.n_batches = 0

    def now_ns(self) -> int:
        return time.time_ns()

    def epoch_ns(self, perf_ts: float) -> int:
        return perf_ns(perf_ts)

    # -- input: recv_requests + process_input_requests --
    def received(self, msgs: list) -> None:
        # recv_requests, after the broadcast: every rank opens its context
        for m in msgs:
            if m[0] == "req":
                t: TokenizedReq = m[1]
                trace_mod.trace_set_proc_propagate_context(t.rid, t.carried)
                trace_mod.trace_slice_start("", t.rid, anonymous=True)
                tc = _thread_ctx(t.rid)
                first = open_slice(t.rid)
                self.reqs[t.rid] = {
                    "rid": t.rid,
                    "scheduler": self.rank_name,
                    "pid": threading.get_native_id(),
                    "thread_span_id": span_id(tc.thread_span),
                    "thread_span_name": tc.thread_span.name,
                    "thread_start_ns": tc.thread_span.start_time,
                    "first_slice_links_to": (f"{tc.last_span_context.span_id:016x}"
                                             if tc.last_span_context else None),
                    "slices": [],
                    "tokens": [],
                    "prefill_chunks": [],
                    "retracts_ns": [],
                    "recv_ns": first.start_time,
                }

    def handle_generate_request(self, t: TokenizedReq) -> None:
        self._add_request_to_queue(SimReq(t))

    def _add_request_to_queue(self, req: SimReq, is_retracted: bool = False) -> None:
        self.waiting.append(req)
        rec = self.reqs[req.rid]
        span = open_slice(req.rid)
        trace_mod.trace_slice_end(STAGE["request_process"], req.rid, auto_next_anon=True)
        if span is not None:
            rec["slices"].append(slice_rec(span, batch=None, token=False,
                                           why="retracted" if is_retracted else "queued"))
        if is_retracted:
            rec["retracts_ns"].append(span.end_time if span is not None else time.time_ns())
        else:
            rec["wait_queue_ns"] = span.end_time if span is not None else time.time_ns()

    # -- scheduling --
    def scheduled(self, batch: model.Batch) -> dict:
        self.n_batches += 1
        truth = {
            "rank": self.rank_name,
            "seq": f"{self.rank_name}#{self.n_batches:03d}",
            "bid": None,
            "forward_mode": batch.mode,
            "batch_size": len(batch.reqs),
            "schedule_ns": time.time_ns(),
            "members": [r.rid for r in batch.reqs],
            "prefill_tokens": dict(batch.take),
            "decode_rows": [r.rid for r in (batch.decoding if batch.is_mixed() else
                                            (batch.reqs if batch.is_decode() else []))],
            "produced": [],
        }
        if SCHEDULE_EVENTS:
            trace_mod.trace_event_batch("schedule", batch.reqs)
            ev = {}
            for r in batch.reqs:
                s = open_slice(r.rid)
                if s is not None and s.events:
                    e = s.events[-1]
                    ev[r.rid] = e.timestamp
                    truth["bid"] = e.attributes["bid"]
            truth["event_ns"] = ev
            if ev:
                truth["schedule_ns"] = min(ev.values())
        return truth

    # -- results --
    def _token(self, req: SimReq, batch: model.Batch) -> None:
        req.output.append(len(req.output))
        self.reqs[req.rid]["tokens"].append(
            {"ns": None, "batch": batch.truth["seq"], "bid": batch.truth["bid"]})
        batch.truth["produced"].append(req.rid)
        self._update_finish_state(req)

    def completion_ns(self, req: SimReq) -> int:
        return time.time_ns()

    def _closed(self, req: SimReq, batch: model.Batch, span, chunk: Optional[int]) -> None:
        """Record a slice trace.py just ended at this batch's result for req."""
        rec = self.reqs[req.rid]
        seq = batch.truth["seq"]
        tok = [t for t in rec["tokens"] if t["batch"] == seq and t["ns"] is None]
        for t in tok:
            t["ns"] = span.end_time
        rec["slices"].append(slice_rec(span, batch=seq, token=bool(tok)))
        if chunk is not None:
            rec["prefill_chunks"].append({
                "batch": seq, "bid": batch.truth["bid"], "tokens": chunk,
                "after_retracts": len(rec["retracts_ns"]),
                "schedule_ns": batch.truth["schedule_ns"],
                "slice": span_name(span), "start_ns": span.start_time, "end_ns": span.end_time,
            })

    def _slice_batch(self, batch: model.Batch, name) -> None:
        # trace_slice_batch(name, batch.reqs): every member whose context is still open here
        spans = [(r, open_slice(r.rid)) for r in batch.reqs]
        trace_mod.trace_slice_batch(name, batch.reqs)
        for r, s in spans:
            if s is not None:
                self._closed(r, batch, s, batch.take.get(r.rid))

    def _slice_one(self, req: SimReq, batch: model.Batch, name, **kw) -> None:
        s = open_slice(req.rid)
        trace_mod.trace_slice(name, req.rid, **kw)
        if s is not None:
            self._closed(req, batch, s, batch.take.get(req.rid))

    def process_batch_result_prefill(self, batch: model.Batch) -> None:
        batch.truth["result_ns"] = time.time_ns()
        skip = None
        for req in batch.reqs:
            if (req.finished() and req.inflight_middle_chunks <= 0) or req.is_retracted:
                continue
            if req.inflight_middle_chunks <= 0:
                self._token(req, batch)
                if req.finished():
                    self._release(req)
                if PER_REQ_PREFILL_SLICES:
                    self._slice_one(req, batch, STAGE["prefill"],
                                    auto_next_anon=not req.finished(),
                                    thread_finish_flag=req.finished())
            else:
                req.inflight_middle_chunks -= 1
                skip = req
                if PER_REQ_PREFILL_SLICES:
                    self._slice_one(req, batch, STAGE["chunk"], auto_next_anon=True)
        self.stream_output(batch.reqs, skip)
        if not PER_REQ_PREFILL_SLICES:
            self._slice_batch(batch, STAGE["prefill"])

    def process_batch_result_decode(self, batch: model.Batch) -> None:
        batch.truth["result_ns"] = time.time_ns()
        for req in batch.reqs:
            if req.is_retracted or (self.sc.overlap and req.finished()):
                continue
            self._token(req, batch)
            if req.finished():
                self._release(req)
        self.stream_output(batch.reqs)
        self._slice_batch(batch, STAGE["decode"])

    def run(self) -> dict:
        truth = super().run()
        truth["never_ended"] = never_ended()
        return truth


def never_ended() -> dict:
    """Spans trace.py still holds open in this process: they are never exported."""
    out = {}
    for rid, ctx in trace_mod.reqs_context.items():
        spans = []
        if ctx.root_span is not None:
            spans.append({"what": "root", "name": ctx.root_span.name, "span_id": span_id(ctx.root_span)})
        b = getattr(ctx, "bootstrap_room_span", None)
        if b is not None:
            spans.append({"what": "bootstrap_room", "name": b.name, "span_id": span_id(b)})
        for tc in ctx.threads_context.values():
            spans.append({"what": "thread", "name": tc.thread_span.name, "span_id": span_id(tc.thread_span)})
            for sl in tc.cur_slice_stack:
                spans.append({"what": "slice", "name": span_name(sl.span), "span_id": span_id(sl.span)})
        out[rid] = spans
    return out


def scheduler_main(sc: Scenario, endpoint: str, conn_in, conn_out, tp_rank, dp_rank,
                   follower=None, leader=None) -> None:
    os.environ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = protocol_of(sc)
    init_tracing(endpoint, "Scheduler", tp_rank, dp_rank)  # run_scheduler_process
    name = f"TP{tp_rank}" + (f"-DP{dp_rank}" if dp_rank is not None else "")
    sched = Scheduler(sc, conn_in, conn_out, tp_rank, dp_rank, name, follower, leader)
    conn_out.send(("ready",))
    truth = sched.run()
    gc.collect()
    time.sleep(0.6)  # let the BatchSpanProcessor export on its own timer first
    flush_tracing()
    conn_out.send(("truth", truth))


def dp_controller_main(sc: Scenario, endpoint: str, conn_in, outs, conn_tok) -> None:
    os.environ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = protocol_of(sc)
    if DPC_TRACES:  # run_data_parallel_controller_process (0.5.3 does not trace here)
        init_tracing(endpoint, "DP Controller")
    conn_tok.send(("ready",))
    rr = 0
    dispatched = {}
    dc = {}
    while True:
        m = conn_in.recv()
        if m[0] == "req":
            t: TokenizedReq = m[1]
            if DPC_TRACES:  # dispatching_with_trace
                trace_mod.trace_set_proc_propagate_context(t.rid, t.carried)
                trace_mod.trace_slice_start(STAGE["dc_dispatch"], t.rid)
                s = open_slice(t.rid)
                tc = _thread_ctx(t.rid)
                t.carried = trace_mod.trace_get_proc_propagate_context(t.rid)
            outs[rr].send(m)  # round robin
            dispatched[t.rid] = rr
            if DPC_TRACES:
                trace_mod.trace_slice_end(STAGE["dc_dispatch"], t.rid, thread_finish_flag=True)
                dc[t.rid] = {"thread_span_id": span_id(tc.thread_span),
                             "thread_span_name": tc.thread_span.name,
                             "slice": slice_rec(s)}
            rr = (rr + 1) % len(outs)
        elif m[0] == "abort":
            for o in outs:
                o.send(m)
        elif m[0] == "shutdown":
            for o in outs:
                o.send(m)
            break
    time.sleep(0.6)
    if DPC_TRACES:
        flush_tracing()
    conn_tok.send(("truth", {"rank": "dp_controller", "dispatched": dispatched, "dc_dispatch": dc}))


# --- the tokenizer (main process) ----------------------------------------------


@dataclass
class _State:  # ReqState (the fields convert_to_span_attrs reads)
    obj: model.GenerateReqInput
    created_time: float
    finished_time: float = 0.0
    first_token_time: float = 0.0
    last_time: float = 0.0
    finished_time_perf: float = 0.0
    first_token_time_perf: float = 0.0
    request_sent_to_scheduler_ts: float = 0.0
    out: int = 0
    finished: bool = False
    abort_sent: bool = False


@dataclass
class _RecvObj:  # BatchStrOutput, one row
    completion_tokens: list
    prompt_tokens: list
    cached_tokens: list
    finished_reasons: list


class _TM:  # what convert_to_span_attrs reads from the TokenizerManager
    enable_trace = True
    served_model_name = MODEL_NAME


def tokenizer_arrive(p: ReqPlan, rid: str, created: float, to_sched, truth_rec: dict) -> None:
    """generate_request -> _tokenize_one_request -> _send_one_request, for one request.

    Runs in its own contextvars context, as each request's asyncio task does:
    0.5.3's SglangTracePropagateContext.to_dict() calls context.attach(root) and
    never detaches, so in a shared context the next request's root span would be
    started as a child of this one's."""
    ts = int(created * 1e9)
    if REQ_START_ROLE:
        trace_mod.trace_req_start(rid, None, ts=ts, role="null", external_trace_header={})
    else:
        trace_mod.trace_req_start(rid, None, ts=ts)
    trace_mod.trace_slice_start("", rid, ts=ts, anonymous=True)
    ctx = trace_mod.reqs_context[rid]
    root = ctx.root_span
    tc = _thread_ctx(rid)
    truth_rec.update({
        "trace_id": f"{root.get_span_context().trace_id:032x}",
        "root_span_id": span_id(root),
        "root_name": root.name,
        "created_ns": ts,
        "tokenizer_thread_span_id": span_id(tc.thread_span),
        "tokenizer_thread_span_name": tc.thread_span.name,
    })
    b = getattr(ctx, "bootstrap_room_span", None)
    if b is not None:
        truth_rec["bootstrap_room_span_id"] = span_id(b)
        truth_rec["bootstrap_room_span_name"] = b.name
    s = open_slice(rid)
    time.sleep(0.0005 + p.prompt * 1e-7)  # tokenizing
    trace_mod.trace_slice_end(STAGE["tokenize"], rid)
    tok = slice_rec(s)
    trace_mod.trace_slice_start(STAGE["dispatch"], rid)
    s = open_slice(rid)
    trace_context = trace_mod.trace_get_proc_propagate_context(rid)
    to_sched.send(("req", TokenizedReq(rid, p.prompt, p.max_new, p.eos_at, p.stream, trace_context)))
    sent = time.time()  # state.request_sent_to_scheduler_ts (0.5.9)
    trace_mod.trace_slice_end(STAGE["dispatch"], rid, thread_finish_flag=True)
    truth_rec["tokenizer_slices"] = [tok, slice_rec(s)]
    truth_rec["tokenizer_thread_end_ns"] = s.end_time
    truth_rec["_sent"] = sent


def tokenizer_main(sc: Scenario, endpoint: str, to_sched, from_sched: list, truth: dict) -> None:
    os.environ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = protocol_of(sc)
    init_tracing(endpoint, "Tokenizer")  # launch_server (single tokenizer)
    base = contextvars.copy_context()
    rtruth = truth["requests"]

    def arrive(p: ReqPlan, rid: str) -> _State:
        created = time.time()
        rec = rtruth[rid] = {
            "key": p.key, "rid": rid, "stream": p.stream, "sampling_params": p.sampling,
            "prompt_tokens": p.prompt,
        }
        base.copy().run(tokenizer_arrive, p, rid, created, to_sched, rec)
        st = _State(model.GenerateReqInput(rid, p.stream, dict(p.sampling)), created)
        st.request_sent_to_scheduler_ts = rec.pop("_sent")
        return st

    def abort_out(rid: str, st: _State) -> None:  # _handle_abort_req: no tracing call
        rtruth[rid]["finished_ns"] = None
        rtruth[rid]["finish_reason"] = {"type": "abort", "message": WAITING_ABORT_MESSAGE}
        rtruth[rid]["output_tokens"] = st.out
        rtruth[rid]["root_exported"] = False

    ranks = model.tokenizer_loop(
        sc, to_sched, from_sched, rtruth, arrive=arrive,
        on_output=lambda recs, states: handle_batch_output(sc, recs, states, rtruth),
        on_abort_out=abort_out, now_ns=time.time_ns)
    truth["tokenizer_never_ended"] = never_ended()
    flush_tracing()
    truth["ranks"] = ranks


def handle_batch_output(sc: Scenario, recs: List[OutRec], states: Dict[str, _State], rtruth: dict) -> None:
    for rec in recs:
        st = states.get(rec.rid)
        if st is None:
            continue
        tr = rtruth[rec.rid]
        st.out += rec.new_tokens
        if "tokenizer_first_output_ns" not in tr:
            tr["tokenizer_first_output_ns"] = time.time_ns()
        st.finished = rec.finished_reason is not None
        recv_obj = _RecvObj([rec.completion_tokens], [rec.prompt_tokens], [rec.cached_tokens],
                            [rec.finished_reason])
        if st.finished:
            st.finished_time = time.time()
            st.finished_time_perf = time.perf_counter()
            ts = int(st.finished_time * 1e9)
            if convert_to_span_attrs is not None:
                trace_mod.trace_req_finish(rec.rid, ts=ts, attrs=convert_to_span_attrs(_TM(), st, recv_obj, 0))
            else:
                trace_mod.trace_req_finish(rec.rid, ts=ts)
            tr["finished_ns"] = ts
            tr["finish_reason"] = rec.finished_reason
            tr["output_tokens"] = rec.completion_tokens
            tr["root_exported"] = True
            del states[rec.rid]
        # collect_metrics runs after the finish handling (0.5.9 only reads it for spans)
        if sc.metrics and st.first_token_time == 0.0:
            st.first_token_time = st.last_time = time.time()
            st.first_token_time_perf = time.perf_counter()
            tr["tokenizer_first_token_ns"] = int(st.first_token_time * 1e9)


# --- orchestration -------------------------------------------------------------


def run(sc: Scenario, out: str) -> dict:
    protocol = protocol_of(sc)
    truth: dict = {
        "sglang_version": SGLANG_VERSION,
        "trace_api": "tracing/trace.py (rid-keyed functions)",
        "call_sites": CALLS,
        "scenario": sc.name,
        "about": sc.about,
        "server_args": {
            "enable_trace": True,
            "otlp_traces_protocol": protocol,
            "disable_overlap_schedule": not sc.overlap,
            "enable_mixed_chunk": sc.mixed_chunk,
            "chunked_prefill_size": model.CHUNKED_PREFILL_SIZE,
            "dp_size": sc.dp,
            "tp_size": sc.tp,
            "load_balance_method": "round_robin",
            "max_running_requests": sc.max_running,
            "stream_interval": 1,
            "enable_metrics": sc.metrics,
            "served_model_name": MODEL_NAME,
        },
        "requests": {},
    }
    return model.run_scenario(sc, out, protocol, truth, tokenizer_main=tokenizer_main,
                              scheduler_main=scheduler_main, dp_controller_main=dp_controller_main)


def finalize(truth: dict) -> dict:
    ranks = sorted(truth.pop("ranks"), key=lambda r: r["rank"])
    batches = []
    dpc = None
    never = {"tokenizer": truth.pop("tokenizer_never_ended")}
    for r in ranks:
        if r["rank"] == "dp_controller":
            dpc = r
            continue
        batches += r["batches"]
        never[r["rank"]] = r["never_ended"]
    batches.sort(key=lambda b: (b["schedule_ns"], b["rank"]))
    reqs = []
    for rid, tr in truth["requests"].items():
        tr["schedulers"] = [r["reqs"][rid] for r in ranks
                            if r["rank"] != "dp_controller" and rid in r["reqs"]]
        if dpc is not None:
            tr["dp_rank"] = dpc["dispatched"].get(rid)
            if rid in dpc["dc_dispatch"]:
                tr["dp_controller"] = dpc["dc_dispatch"][rid]
        main = tr["schedulers"][0] if tr["schedulers"] else None
        if main is not None:
            tr["token_times_ns"] = [t["ns"] for t in main["tokens"]]
            tr["prefill_chunks"] = main["prefill_chunks"]
            if main["tokens"]:
                tr["scheduler_first_token_ns"] = main["tokens"][0]["ns"]
        tr["never_exported"] = [dict(s, process=proc) for proc, d in never.items() for s in d.get(rid, [])]
        reqs.append(tr)
    reqs.sort(key=lambda t: t["created_ns"])
    truth["requests"] = reqs
    truth["batches"] = batches
    truth["notes"] = [
        "All times are epoch ns. trace.py takes its own times (time.time_ns()) for every slice "
        "the scheduler ends, so those are read back from the span objects it created: "
        "schedulers[*].slices[*] are the slices that rank ended for the request, in order, with "
        "the batch whose result ended them and whether that batch gave the request a token. "
        "created_ns/finished_ns are the ts the tokenizer passed (int(time.time()*1e9)).",
        "schedulers[*].tokens / token_times_ns: one per output token; ns = end of the slice "
        "trace.py ended for the request when the scheduler processed the result of the batch "
        "that produced it (prefill / decode loop in 0.5.3; prefill_forward / decode_loop in 0.5.9).",
        "prefill_chunks[*]: one per prefill pass (chunk) with its tokens and the slice closed at "
        "its result. batches[*].seq is this model's batch id; bid is SGLang's (0.5.9 schedule "
        "events), null in 0.5.3, which emits no batch ids.",
        "never_exported: spans trace.py still held open when the process stopped (a request "
        "aborted in the waiting queue); they are not in spans.jsonl, and spans that name them as "
        "parent are exported anyway.",
    ]
    return truth


def _scalar(v) -> bool:
    return not isinstance(v, (dict, list))


def dumps_truth(o, ind: int = 0) -> str:
    """JSON with one line per small object (a slice, a token, a batch), to keep files short."""
    vals = list(o.values()) if isinstance(o, dict) else o if isinstance(o, list) else None
    multi = isinstance(o, list) and (any(isinstance(v, dict) for v in o)
                                     or all(isinstance(v, str) for v in o) and len(json.dumps(o)) > 200)
    if vals is None or not multi and all(_scalar(v) or all(_scalar(w) for w in (v.values() if isinstance(v, dict) else v))
                           for v in vals):
        return json.dumps(o)
    pad = " " * (ind + 1)
    if isinstance(o, dict):
        items = [f"{pad}{json.dumps(k)}: {dumps_truth(v, ind + 1)}" for k, v in o.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * ind + "}"
    items = [pad + dumps_truth(v, ind + 1) for v in o]
    return "[\n" + ",\n".join(items) + "\n" + " " * ind + "]"


def main() -> int:
    return model.main("Run SGLang 0.5.3-0.5.9's tracing for one scenario.", SCENARIOS, run, finalize, dumps_truth)


if __name__ == "__main__":
    sys.exit(main())
