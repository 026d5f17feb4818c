#!/usr/bin/env python3
"""Drive SGLang's own request tracing (``--enable-trace``) without a GPU.

The tracing code that runs is the installed wheel's (see sgl_stubs.py for the
few modules replaced because they import torch). What this file provides is the
part of the server around it: a tokenizer process, a scheduler process per rank
(and a DP controller for --dp-size 2), all started with ``multiprocessing``'s
spawn method as ``launch_server`` starts them, each calling
``process_tracing_init`` + ``trace_set_thread_info`` the way SGLang's process
entry points do. Requests go from the tokenizer to the scheduler pickled, with
the request's ``APIServerReqTimeStats`` pickled by its own ``__getstate__``
(which carries ``TraceReqContext.__getstate__``: the W3C traceparent of the root
span and the previous slice's ids). The scheduler rebuilds its stats with
``SchedulerReqTimeStats.new_from_obj`` as ``Req.__init__`` does.

The scheduler here is a small model of SGLang's: a waiting queue, a running
batch, chunked prefill, optional mixed chunks, retraction under KV pressure,
aborts, and the two event loops (``event_loop_overlap``, the default, which
launches batch k+1 before it processes the result of batch k; and
``event_loop_normal`` for --disable-overlap-schedule). The model's forward pass
is a sleep of a few ms on a simulated GPU timeline. Every tracing call is made
at the point where SGLang's scheduler, batch-result processor, tokenizer
manager and DP controller make it (line numbers below are for 0.5.23):

  tokenizer_manager._init_req_state      init_trace_ctx, set_created_time (l.3844)
  tokenizer_manager (tokenize)           set_tokenize_finish_time (l.1660)
  tokenizer_manager._send_one_request    set_api_server_dispatch_time, pickle, send,
                                         set_api_server_dispatch_finish_time (l.1785-1796)
  data_parallel_controller               new_from_obj, set_dp_dispatch_time, pickle, send,
                                         set_dp_dispatch_finish_time (l.372-383)
  schedule_batch.Req.__init__            new_from_obj, set_scheduler_recv_time (l.1387-1392)
  scheduler._add_request_to_queue        set_wait_queue_entry_time (l.3494)
  scheduler._get_new_batch_prefill_raw   set_time_batch(can_run, set_forward_entry_time) (l.4332)
  scheduler.get_next_batch_to_run        set_schedule_time_batch(batch) (l.4023)
  scheduler.update_running_batch         retract -> _add_request_to_queue(is_retracted) (l.4536)
  batch_result_processor (prefill)       set_prefill_finished_time / set_last_chunked_prefill_
                                         finish_time / set_completion_time (l.352, 392, 445)
  batch_result_processor (decode)        set_last_decode_finish_time, set_completion_time (l.1034, 1375)
  scheduler.abort_request                waiting: drop + abort output; running: to_finish (l.5675-5812)
  tokenizer_manager._handle_batch_output first-token time, convert_to_span_attrs,
                                         set_finished_time (l.2731-2752)
  tokenizer_manager._handle_abort_req    set_finished_time() without span attrs (l.3594)

Ground truth (what the scheduler did, with the exact times it handed to
SGLang's code, converted to epoch ns as SGLang converts them) goes to truth.json.

Usage: drive.py --scenario NAME --out DIR   (run with the venv's python; see make.sh)
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import hashlib
import importlib.metadata
import inspect
import json
import multiprocessing as mp
import os
import pickle
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import sgl_stubs  # noqa: E402

# Every process (the spawned ones re-import this file) loads the same modules.
trace_mod, rts, ForwardMode, DisaggregationMode = sgl_stubs.load()
_sb = sys.modules["sglang.srt.managers.schedule_batch"]
FINISH_ABORT, FINISH_LENGTH, FINISH_MATCHED_TOKEN = _sb.FINISH_ABORT, _sb.FINISH_LENGTH, _sb.FINISH_MATCHED_TOKEN

SGLANG_VERSION = importlib.metadata.version("sglang")

# --- version switches (what differs between the releases this drives) --------
# 0.5.10 has no PP rank in thread names and a two-argument process_tracing_init.
_TSI_PARAMS = inspect.signature(trace_mod.trace_set_thread_info).parameters
HAS_PP_RANK = "pp_rank" in _TSI_PARAMS
_PTI_PARAMS = inspect.signature(trace_mod.process_tracing_init).parameters
HAS_TRACE_MODULES = "trace_modules" in _PTI_PARAMS
# 0.5.23: set_finished_time(ts, span_attrs) merges the latency attrs after the
# finish time is stamped. 0.5.10: the tokenizer sets the root attrs first
# (trace_set_root_attrs) and then calls set_finished_time().
FINISH_TAKES_ATTRS = "span_attrs" in inspect.signature(
    rts.APIServerReqTimeStats.set_finished_time
).parameters
with open(sgl_stubs.src("srt/managers/scheduler.py"), encoding="utf-8") as _f:
    _SCHED_SRC = _f.read()
# 0.5.23's overlap loop leaves out of the next decode batch a request whose
# queued result reaches max_new_tokens (_reqs_finishing_inflight); 0.5.10 runs
# it one more (wasted) decode step.
SKIP_FINISHING_DECODE = "def _reqs_finishing_inflight" in _SCHED_SRC
del _SCHED_SRC

# tokenizer_manager methods run on a stand-in manager (compiled from the wheel).
_TM = "srt/managers/tokenizer_manager.py"


class _NotEmbedding:  # recv_obj is never a BatchEmbeddingOutput here
    pass


_tm_globals = {
    "SpanAttributes": trace_mod.SpanAttributes,
    "json": json,
    "time": time,
    "BatchEmbeddingOutput": _NotEmbedding,
}
convert_to_span_attrs = sgl_stubs.extract(_TM, "TokenizerManager.convert_to_span_attrs", _tm_globals)
try:
    get_scheduler_first_token_time = sgl_stubs.extract(
        _TM, "TokenizerManager._get_scheduler_first_token_time", _tm_globals
    )
except LookupError:  # not in 0.5.10: first token = first output received
    get_scheduler_first_token_time = None

MODEL_NAME = "Qwen/Qwen3-0.6B"  # a served model name; no model is loaded
CHUNKED_PREFILL_SIZE = 4096
FORCE_STREAM_INTERVAL = 50  # SGLANG_FORCE_STREAM_INTERVAL default


def ns(perf_ts: float) -> int:
    """A perf_counter() stamp as SGLang writes it into spans."""
    return rts.convert_time_to_realtime_ns(perf_ts)


# --- scenarios ----------------------------------------------------------------


@dataclass
class ReqPlan:
    key: str  # short name used in truth.json
    at_ms: float  # arrival, ms after the first request
    prompt: int  # prompt tokens
    max_new: int
    stream: bool
    eos_at: Optional[int] = None  # the model emits EOS as output token n
    sampling: Dict[str, Any] = field(default_factory=dict)  # what the user sent
    abort_after_tokens: Optional[int] = None  # client goes away after n streamed tokens
    abort_at_ms: Optional[float] = None  # client goes away at this time


@dataclass
class Scenario:
    name: str
    about: str
    requests: List[ReqPlan]
    overlap: bool = True
    mixed_chunk: bool = False
    dp: int = 1
    tp: int = 1
    protocol: str = "grpc"  # OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: grpc | http/protobuf
    max_running: int = 64
    kv_capacity: int = 10_000_000
    new_token_ratio: float = 0.7  # share of max_new tokens reserved on admission


def _three(overlap: bool) -> List[ReqPlan]:
    return [
        ReqPlan("eos", 0, 180, 64, True, eos_at=12,
                sampling={"max_new_tokens": 64, "temperature": 0}),
        ReqPlan("length", 8, 240, 20, True,
                sampling={"max_new_tokens": 20, "temperature": 0.7, "top_p": 0.9}),
        ReqPlan("long", 30, 9000, 7, False,
                sampling={"max_new_tokens": 7, "temperature": 0.6, "top_k": 20}),
    ]


SCENARIOS: Dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario(
            "overlap",
            "default overlap scheduler; streaming EOS, streaming length limit, "
            "9000-token non-streaming prompt in 3 chunks of <= 4096",
            _three(True),
            overlap=True,
            protocol="grpc",
        ),
        Scenario(
            "no-overlap",
            "same requests with --disable-overlap-schedule; exported over OTLP/HTTP",
            _three(False),
            overlap=False,
            protocol="http/protobuf",
        ),
        Scenario(
            "retract",
            "two streaming requests fill a 300-token KV pool; the one with fewer "
            "output tokens is retracted, re-queued and prefilled again",
            [
                ReqPlan("kept", 0, 120, 24, True, sampling={"max_new_tokens": 24}),
                ReqPlan("retracted", 5, 150, 24, True, sampling={"max_new_tokens": 24, "temperature": 1.0}),
            ],
            kv_capacity=300,
            new_token_ratio=0.4,
        ),
        Scenario(
            "abort",
            "a streaming request aborted by its client while decoding, and one "
            "aborted while still in the waiting queue (--max-running-requests 1)",
            [
                ReqPlan("running", 0, 200, 64, True, abort_after_tokens=6,
                        sampling={"max_new_tokens": 64, "temperature": 0.8}),
                ReqPlan("queued", 5, 100, 16, True, abort_at_ms=20,
                        sampling={"max_new_tokens": 16}),
            ],
            max_running=1,
        ),
        Scenario(
            "dp2",
            "--dp-size 2: a DP controller process and two scheduler processes "
            "(DP 0, DP 1), requests dispatched round robin; OTLP/HTTP",
            [
                ReqPlan("a", 0, 150, 10, True, sampling={"max_new_tokens": 10}),
                ReqPlan("b", 2, 160, 12, True, sampling={"max_new_tokens": 12}),
                ReqPlan("c", 6, 170, 30, True, eos_at=8, sampling={"max_new_tokens": 30}),
                ReqPlan("d", 9, 5000, 5, False, sampling={"max_new_tokens": 5}),
            ],
            dp=2,
            protocol="http/protobuf",
        ),
        Scenario(
            "tp2",
            "--tp-size 2: two scheduler processes (TP 0, TP 1) that run the same "
            "batches; each traces every request with its own batch ids",
            [
                ReqPlan("stream", 0, 130, 8, True, sampling={"max_new_tokens": 8}),
                ReqPlan("batch", 3, 140, 6, False, sampling={"max_new_tokens": 6}),
            ],
            tp=2,
        ),
        Scenario(
            "mixed",
            "--enable-mixed-chunk (overlap on): running decodes ride along in "
            "prefill batches (forward mode MIXED)",
            [
                ReqPlan("decoding", 0, 150, 24, True, sampling={"max_new_tokens": 24}),
                ReqPlan("chunked", 20, 6000, 6, True, sampling={"max_new_tokens": 6}),
                ReqPlan("joins", 24, 300, 6, True, sampling={"max_new_tokens": 6}),
            ],
            mixed_chunk=True,
        ),
    ]
}


def rid_for(scenario: str, key: str) -> str:
    # SGLang's rids are uuid4().hex; these are fixed so reruns keep them.
    return hashlib.md5(f"tokenscope/{scenario}/{key}".encode()).hexdigest()


# --- messages between processes ----------------------------------------------


@dataclass
class TokenizedReq:
    """Stands for TokenizedGenerateReqInput: only what the scheduler model needs.
    time_stats is the pickled APIServerReqTimeStats (as wrap_pickle_fields keeps it)."""

    rid: str
    prompt: int
    max_new: int
    eos_at: Optional[int]
    stream: bool
    time_stats: bytes


@dataclass
class OutRec:
    rid: str
    new_tokens: int
    finished_reason: Optional[dict]
    completion_tokens: int
    prompt_tokens: int
    cached_tokens: int
    time_stats: bytes  # pickled SchedulerReqTimeStats (its __getstate__ decides what goes)


# --- tracing setup as the process entry points do it ------------------------


def init_tracing(endpoint: str, label: str, tp=None, dp=None, pp=None) -> None:
    if HAS_TRACE_MODULES:
        # run_scheduler_process / http_server lifespan: otlp_service_name is None
        # by default (-> OTEL_SERVICE_NAME or "sglang"), trace_modules "request".
        trace_mod.process_tracing_init(endpoint, None, trace_modules="request")
    else:
        trace_mod.process_tracing_init(endpoint, "sglang")
    if HAS_PP_RANK:
        trace_mod.trace_set_thread_info(label, tp, dp, pp)
    else:
        trace_mod.trace_set_thread_info(label, tp, dp)


def flush_tracing() -> None:
    from opentelemetry import trace as ot

    provider = ot.get_tracer_provider()
    provider.force_flush()
    provider.shutdown()


# --- the scheduler model ------------------------------------------------------


class SimReq:
    def __init__(self, t: TokenizedReq, time_stats):
        self.rid = t.rid
        self.prompt = t.prompt
        self.max_new = t.max_new
        self.eos_at = t.eos_at
        self.stream = t.stream
        self.time_stats = time_stats
        self.output: List[int] = []  # indexes into truth token list
        self.prefilled = 0  # tokens with KV computed
        self.kv = 0  # KV tokens held
        self.finished_reason: Optional[dict] = None
        self.to_finish: Optional[dict] = None
        self.finished_output = False
        self.inflight_middle_chunks = 0
        self.is_retracted = False
        self.send_offset = 0

    def fill_len(self) -> int:
        return self.prompt + len(self.output)

    def finished(self) -> bool:
        return self.finished_reason is not None


@dataclass
class Batch:
    forward_mode: Any  # ForwardMode (the attribute set_schedule_time_batch reads)
    reqs: List[SimReq]
    take: Dict[str, int] = field(default_factory=dict)  # rid -> prefill tokens this batch
    decoding: List[SimReq] = field(default_factory=list)  # decode rows of a MIXED batch
    done_at: float = 0.0
    truth: Optional[dict] = None


class Scheduler:
    def __init__(self, sc: Scenario, conn_in, conn_out, tp_rank: int, dp_rank, rank_name: str,
                 follower=None, leader=None):
        self.sc = sc
        self.conn_in = conn_in
        self.conn_out = conn_out
        self.tp_rank = tp_rank
        self.dp_rank = dp_rank
        self.rank_name = rank_name
        self.follower = follower  # TP leader -> follower pipe
        self.leader = leader  # TP follower <- leader pipe
        self.waiting: List[SimReq] = []
        self.running: List[SimReq] = []
        self.chunked: Optional[SimReq] = None
        self.last_batch: Optional[Batch] = None
        self.result_queue: deque = deque()
        self.gpu_free = 0.0
        self.kv_used = 0
        self.ratio = sc.new_token_ratio
        self.stopping = False
        self.batches: List[dict] = []
        self.reqs: Dict[str, dict] = {}
        self.sched_probe: List[tuple] = []

    # -- input --
    def ingest_requests(self, block: bool) -> None:
        if self.leader is not None:
            msgs = self.leader.recv()  # broadcast_pyobj from TP rank 0
        else:
            msgs = []
            if block and not self.conn_in.poll(0.001):
                pass
            while self.conn_in.poll():
                msgs.append(self.conn_in.recv())
            if self.follower is not None:
                self.follower.send(msgs)
        for m in msgs:
            kind = m[0]
            if kind == "req":
                self.handle_generate_request(m[1])
            elif kind == "abort":
                self.abort_request(m[1])
            elif kind == "shutdown":
                self.stopping = True

    def handle_generate_request(self, t: TokenizedReq) -> None:
        api_stats = pickle.loads(t.time_stats)  # unwrap_pickle_fields
        # schedule_batch.Req.__init__
        stats = rts.SchedulerReqTimeStats.new_from_obj(api_stats)
        stats.set_metrics_collector(None)
        stats.set_scheduler_recv_time()
        req = SimReq(t, stats)
        self.reqs[req.rid] = {
            "rid": req.rid,
            "scheduler": self.rank_name,
            "tokens": [],
            "prefill_chunks": [],
            "retracts_ns": [],
            "recv_ns": ns(stats.scheduler_recv_time),
        }
        self._add_request_to_queue(req)

    def _add_request_to_queue(self, req: SimReq, is_retracted: bool = False) -> None:
        self.waiting.append(req)
        ts = time.perf_counter()
        req.time_stats.set_wait_queue_entry_time(ts)
        if is_retracted:
            self.reqs[req.rid]["retracts_ns"].append(ns(ts))
        else:
            self.reqs[req.rid]["wait_queue_ns"] = ns(ts)

    def abort_request(self, rid: str) -> None:
        for i in reversed(range(len(self.waiting))):
            req = self.waiting[i]
            if req.rid.startswith(rid):
                # Abort method 1: pop from the queue; the tokenizer is told with an
                # AbortReq. Nothing closes the trace context: it is closed by
                # TraceReqContext.__del__ when the Req is freed.
                self.waiting.pop(i)
                self.reqs[rid]["aborted"] = {"where": "waiting_queue", "ns": ns(time.perf_counter())}
                if self.tp_rank == 0:
                    self.conn_out.send(("abort_out", rid))
                del req  # the last reference: TraceReqContext.__del__ runs here
        for req in self._inflight():
            if not req.finished() and req.rid.startswith(rid):
                # Abort method 3: set to_finish; the next forward finishes it.
                req.to_finish = FINISH_ABORT().to_json()
                self.reqs[rid]["aborted"] = {"where": "running", "ns": ns(time.perf_counter())}

    def _inflight(self) -> List[SimReq]:
        seen = []
        for r in list(self.running) + ([self.chunked] if self.chunked else []) + (
            self.last_batch.reqs if self.last_batch else []
        ):
            if r not in seen:
                seen.append(r)
        return seen

    # -- scheduling --
    def kv_admit(self, req: SimReq, need: int, running: List[SimReq]) -> bool:
        reserve = sum(max(r.max_new - len(r.output), 0) for r in running + [req]) * self.ratio
        return self.kv_used + need + reserve <= self.sc.kv_capacity

    def get_next_batch_to_run(self) -> Optional[Batch]:
        exclude = {id(self.chunked)} if self.chunked else set()
        lb = self.last_batch
        if lb is not None and lb.forward_mode.is_extend():
            keep = [r for r in lb.reqs if not r.finished() and id(r) not in exclude]
            for r in keep:
                if r not in self.running:
                    self.running.append(r)
        self.running = [r for r in self.running if not r.finished()]

        batch = self.get_new_batch_prefill()
        if batch is None and self.running:
            batch = self.update_running_batch()
        if batch is not None:
            n0 = len(self.sched_probe)
            rts.set_schedule_time_batch(batch)  # SGLang's own: bid, batch_size, forward_mode
            ts, attrs = self.sched_probe[n0]
            batch.truth = {
                "rank": self.rank_name,
                "bid": attrs["bid"],
                "forward_mode": attrs.get("forward_mode"),
                "sglang_forward_mode": batch.forward_mode.name,
                "batch_size": attrs["batch_size"],
                "schedule_ns": ns(ts),
                "members": [r.rid for r in batch.reqs],
                "prefill_tokens": dict(batch.take),
                "decode_rows": [r.rid for r in (batch.decoding if batch.forward_mode.is_mixed() else
                                                (batch.reqs if batch.forward_mode.is_decode() else []))],
                "produced": [],
            }
            self.batches.append(batch.truth)
        return batch

    def get_new_batch_prefill(self) -> Optional[Batch]:
        if not self.waiting and self.chunked is None:
            return None
        budget = CHUNKED_PREFILL_SIZE
        can_run: List[SimReq] = []
        take: Dict[str, int] = {}
        new_chunked = None
        if self.chunked is not None:
            c = self.chunked
            rem = c.fill_len() - c.prefilled
            n = min(rem, budget)
            can_run.append(c)
            take[c.rid] = n
            budget -= n
            if rem > n:
                new_chunked = c
        for req in self.waiting:
            if budget <= 0 or new_chunked is not None:
                break
            if len(self.running) + len(can_run) >= self.sc.max_running:
                break
            need = req.fill_len() - req.prefilled
            if not self.kv_admit(req, need, self.running + can_run):
                break
            n = min(need, budget)
            can_run.append(req)
            take[req.rid] = n
            budget -= n
            if n < need:
                new_chunked = req
        if not can_run:
            return None
        self.waiting = [r for r in self.waiting if r not in can_run]
        self.chunked = new_chunked
        if self.chunked is not None:
            self.chunked.inflight_middle_chunks += 1
        rts.set_time_batch(can_run, "set_forward_entry_time")
        for r in can_run:
            r.is_retracted = False  # prepare_for_extend
            r.prefilled += take[r.rid]
            r.kv += take[r.rid]
            self.kv_used += take[r.rid]
            rec = self.reqs[r.rid]
            if "forward_entry_ns" not in rec:
                rec["forward_entry_ns"] = ns(r.time_stats.forward_entry_time)
        batch = Batch(ForwardMode.EXTEND, can_run, take)
        if self.sc.mixed_chunk and self.running:
            finishing = self._reqs_finishing_inflight(self.running)
            self.running = [r for r in self.running if r not in finishing]
            if self.running:
                batch.forward_mode = ForwardMode.MIXED
                batch.decoding = list(self.running)
                batch.reqs = can_run + self.running
                for r in self.running:
                    r.kv += 1
                    self.kv_used += 1
                self.running = []
        return batch

    def _reqs_finishing_inflight(self, reqs: List[SimReq]) -> List[SimReq]:
        if not (self.sc.overlap and SKIP_FINISHING_DECODE and self.result_queue):
            return []
        queued = self.result_queue[0][0].reqs
        return [r for r in reqs if r in queued and len(r.output) + 1 >= r.max_new]

    def update_running_batch(self) -> Optional[Batch]:
        finishing = self._reqs_finishing_inflight(self.running)
        self.running = [r for r in self.running if r not in finishing]
        if not self.running:
            return None
        if self.kv_used + len(self.running) > self.sc.kv_capacity:
            if finishing:
                return None
            # retract_decode: keep the longest outputs, retract from the other end
            order = sorted(self.running, key=lambda r: (len(r.output), -r.prompt), reverse=True)
            retracted = []
            while self.kv_used + len(order) > self.sc.kv_capacity and len(order) > 1:
                r = order.pop()
                self.kv_used -= r.kv
                r.kv = 0
                r.prefilled = 0
                r.inflight_middle_chunks = 0
                r.is_retracted = True
                retracted.append(r)
            self.running = [r for r in self.running if r not in retracted]
            self.ratio = 1.0
            for r in retracted:
                self._add_request_to_queue(r, is_retracted=True)
        for r in self.running:
            r.kv += 1
            self.kv_used += 1
        return Batch(ForwardMode.DECODE, list(self.running))

    # -- the model's forward pass --
    def run_batch(self, batch: Batch) -> None:
        if batch.forward_mode.is_decode():
            dur = 0.004 + 0.0003 * len(batch.reqs)
        else:
            dur = 0.002 + 0.0000025 * sum(batch.take.values()) + 0.0003 * len(batch.decoding)
        now = time.perf_counter()
        start = max(now, self.gpu_free)
        batch.done_at = start + dur
        self.gpu_free = batch.done_at
        batch.truth["gpu_start_ns"] = ns(start)
        batch.truth["gpu_end_ns"] = ns(batch.done_at)

    # -- results --
    def process_batch_result(self, batch: Batch) -> None:
        wait = batch.done_at - time.perf_counter()
        if wait > 0:
            time.sleep(wait)  # result.copy_done.synchronize()
        if batch.forward_mode.is_extend():
            self.process_batch_result_prefill(batch)
        else:
            self.process_batch_result_decode(batch)

    def _token(self, req: SimReq, ts: float, batch: Batch) -> None:
        req.output.append(len(req.output))
        self.reqs[req.rid]["tokens"].append({"ns": ns(ts), "bid": batch.truth["bid"]})
        batch.truth["produced"].append(req.rid)
        self._update_finish_state(req)

    def _update_finish_state(self, req: SimReq) -> None:
        if req.to_finish is not None:
            req.finished_reason, req.to_finish = req.to_finish, None
        elif len(req.output) >= req.max_new:
            req.finished_reason = FINISH_LENGTH(req.max_new).to_json()
        elif req.eos_at is not None and len(req.output) >= req.eos_at:
            req.finished_reason = FINISH_MATCHED_TOKEN(151645).to_json()  # an EOS id

    def _release(self, req: SimReq) -> None:
        self.kv_used -= req.kv
        req.kv = 0
        ts = time.perf_counter()
        req.time_stats.set_completion_time(ts)
        rec = self.reqs[req.rid]
        rec["completion_ns"] = ns(ts)
        rec["finish_reason"] = req.finished_reason

    def process_batch_result_prefill(self, batch: Batch) -> None:
        skip = None
        batch.truth["result_ns"] = ns(time.perf_counter())
        for req in batch.reqs:
            if (req.finished() and req.inflight_middle_chunks <= 0) or req.is_retracted:
                continue
            rec = self.reqs[req.rid]
            if req.inflight_middle_chunks <= 0:
                ts = time.perf_counter()
                last_chunk = req.time_stats.last_chunked_prefill_finish_time
                req.time_stats.set_prefill_finished_time(ts)
                if req.rid in batch.take:
                    self._chunk(rec, req, batch, ts, last_chunk)
                self._token(req, ts, batch)
                if req.finished():
                    self._release(req)
            else:
                req.inflight_middle_chunks -= 1
                skip = req
                ts = time.perf_counter()
                last_chunk = req.time_stats.last_chunked_prefill_finish_time
                req.time_stats.set_last_chunked_prefill_finish_time(ts)
                self._chunk(rec, req, batch, ts, last_chunk)
        self.stream_output(batch.reqs, skip)

    def _chunk(self, rec, req, batch, ts, prev_chunk_end) -> None:
        start = prev_chunk_end if prev_chunk_end > 0 else req.time_stats.last_forward_entry_time
        rec["prefill_chunks"].append({
            "bid": batch.truth["bid"],
            "tokens": batch.take[req.rid],
            "after_retracts": len(rec["retracts_ns"]),
            "schedule_ns": batch.truth["schedule_ns"],
            "start_ns": ns(start),
            "end_ns": ns(ts),
        })

    def process_batch_result_decode(self, batch: Batch) -> None:
        batch.truth["result_ns"] = ns(time.perf_counter())
        for req in batch.reqs:
            if self.sc.overlap and (req.finished() or req.is_retracted):
                continue
            ts = time.perf_counter()
            req.time_stats.set_last_decode_finish_time(ts)
            self._token(req, ts, batch)
            if req.finished():
                self._release(req)
        self.stream_output(batch.reqs)

    def stream_output(self, reqs: List[SimReq], skip: Optional[SimReq] = None) -> None:
        recs = []
        for req in reqs:
            if req is skip:
                continue
            if req.finished():
                if req.finished_output:
                    continue
                req.finished_output = True
                should = True
            elif req.stream:
                should = len(req.output) > req.send_offset
            else:
                should = len(req.output) % FORCE_STREAM_INTERVAL == 0 and len(req.output) > req.send_offset
            if not should:
                continue
            recs.append(OutRec(
                rid=req.rid,
                new_tokens=len(req.output) - req.send_offset,
                finished_reason=req.finished_reason,
                completion_tokens=len(req.output),
                prompt_tokens=req.prompt,
                cached_tokens=0,
                time_stats=pickle.dumps(req.time_stats),
            ))
            req.send_offset = len(req.output)
        if recs and self.tp_rank == 0:  # only TP rank 0 sends to the detokenizer
            self.conn_out.send(("out", recs))

    # -- event loops --
    def event_loop_normal(self) -> None:
        while True:
            idle = not (self.waiting or self.running or self.chunked or self.last_batch)
            self.ingest_requests(block=idle)
            if self.stopping and idle:
                return
            batch = self.get_next_batch_to_run()
            if batch is not None:
                self.run_batch(batch)
                self.process_batch_result(batch)
            self.last_batch = batch

    def event_loop_overlap(self) -> None:
        while True:
            idle = not (self.waiting or self.running or self.chunked or self.result_queue)
            self.ingest_requests(block=idle)
            if self.stopping and idle:
                return
            batch = self.get_next_batch_to_run()
            if batch is not None:
                self.run_batch(batch)
                self.result_queue.append((batch, None))
            if self.last_batch is not None:
                b, _ = self.result_queue.popleft()
                self.process_batch_result(b)
            self.last_batch = batch

    def run(self) -> dict:
        if self.sc.overlap:
            self.event_loop_overlap()
        else:
            self.event_loop_normal()
        return {"rank": self.rank_name, "batches": self.batches, "reqs": self.reqs}


def _install_schedule_probe(sched: Scheduler) -> None:
    """Record (ts, attrs) of each set_schedule_time_batch call: the method still runs as is."""
    orig = rts.SchedulerReqTimeStats.set_last_scheduled_time

    def probe(self, forward_mode, ts=None, attrs=None):
        sched.sched_probe.append((ts, dict(attrs or {})))
        return orig(self, forward_mode, ts, attrs)

    rts.SchedulerReqTimeStats.set_last_scheduled_time = probe


def scheduler_main(sc: Scenario, endpoint: str, conn_in, conn_out, tp_rank, dp_rank,
                   follower=None, leader=None) -> None:
    # run_scheduler_process: tracing set up before the Scheduler is built
    init_tracing(endpoint, "Scheduler", tp_rank, dp_rank, 0)
    name = f"TP{tp_rank}" + (f"-DP{dp_rank}" if dp_rank is not None else "")
    sched = Scheduler(sc, conn_in, conn_out, tp_rank, dp_rank, name, follower, leader)
    _install_schedule_probe(sched)
    conn_out.send(("ready",))  # pipe_writer.send(scheduler.get_init_info())
    truth = sched.run()
    gc.collect()
    time.sleep(0.6)  # let the BatchSpanProcessor export on its own timer first
    flush_tracing()
    conn_out.send(("truth", truth))


def dp_controller_main(sc: Scenario, endpoint: str, conn_in, outs, conn_tok) -> None:
    init_tracing(endpoint, "DP Controller")
    conn_tok.send(("ready",))
    rr = 0
    dispatched = {}
    while True:
        m = conn_in.recv()
        if m[0] == "req":
            t: TokenizedReq = m[1]
            stats = rts.DPControllerReqTimeStats.new_from_obj(pickle.loads(t.time_stats))
            stats.set_dp_dispatch_time()
            t.time_stats = pickle.dumps(stats)
            outs[rr].send(m)  # round robin
            dispatched[t.rid] = rr
            stats.set_dp_dispatch_finish_time()
            rr = (rr + 1) % len(outs)
        elif m[0] == "abort":
            for o in outs:
                o.send(m)
        elif m[0] == "shutdown":
            for o in outs:
                o.send(m)
            break
    time.sleep(0.6)
    flush_tracing()
    conn_tok.send(("truth", {"rank": "dp_controller", "dispatched": dispatched}))


# --- the tokenizer (main process) ----------------------------------------------


@dataclass
class _Obj:  # stands for GenerateReqInput
    rid: str
    stream: bool
    sampling_params: dict


@dataclass
class _State:  # stands for ReqState
    obj: _Obj
    time_stats: Any
    out: int = 0
    finished: bool = False
    abort_sent: bool = False


@dataclass
class _RecvObj:  # stands for BatchStrOutput, one row
    completion_tokens: list
    prompt_tokens: list
    cached_tokens: list
    finished_reasons: list
    time_stats: list


class _TM:  # what convert_to_span_attrs reads from the TokenizerManager
    enable_trace = True
    served_model_name = MODEL_NAME

    class server_args:  # 0.5.10 reads self.server_args.enable_trace
        enable_trace = True
        served_model_name = MODEL_NAME


def tokenizer_main(sc: Scenario, endpoint: str, to_sched, from_sched: list, truth: dict) -> None:
    init_tracing(endpoint, "Tokenizer")  # http_server lifespan
    plans = sorted(sc.requests, key=lambda p: p.at_ms)
    states: Dict[str, _State] = {}
    rtruth = truth["requests"]
    t0 = time.perf_counter() + 0.05
    pending = list(plans)
    waits = []  # (t, rid) aborts planned by time
    expected_truths = len(from_sched)
    got_truth = []
    done = False
    shutdown_at = None

    def send_abort(rid):
        st = states.get(rid)
        if st is None or st.abort_sent:
            return
        st.abort_sent = True
        rtruth[rid]["client_abort_ns"] = ns(time.perf_counter())
        to_sched.send(("abort", rid))

    while True:
        now = time.perf_counter()
        # arrivals
        while pending and now >= t0 + pending[0].at_ms / 1000:
            p = pending.pop(0)
            rid = rid_for(sc.name, p.key)
            created = time.perf_counter()  # obj.received_time
            stats = rts.APIServerReqTimeStats(disagg_mode=DisaggregationMode.NULL)
            stats.init_trace_ctx(rid, None, None)
            stats.set_created_time(created)
            span_ctx = stats.trace_ctx.root_span.get_span_context()
            states[rid] = _State(_Obj(rid, p.stream, dict(p.sampling)), stats)
            rtruth[rid] = {
                "key": p.key,
                "rid": rid,
                "trace_id": f"{span_ctx.trace_id:032x}",
                "root_span_id": f"{span_ctx.span_id:016x}",
                "root_name": f" Req {rid[:8]}",
                "stream": p.stream,
                "sampling_params": p.sampling,
                "prompt_tokens": p.prompt,
                "created_ns": ns(created),
            }
            time.sleep(0.0005 + p.prompt * 1e-7)  # tokenizing
            stats.set_tokenize_finish_time()
            stats.set_api_server_dispatch_time()
            payload = pickle.dumps(stats)  # wrap_pickle_fields / send_pyobj
            to_sched.send(("req", TokenizedReq(rid, p.prompt, p.max_new, p.eos_at, p.stream, payload)))
            stats.set_api_server_dispatch_finish_time()
            if p.abort_at_ms is not None:
                waits.append((t0 + p.abort_at_ms / 1000, rid))
        for t, rid in list(waits):
            if now >= t:
                waits.remove((t, rid))
                send_abort(rid)

        # outputs (handle_loop)
        for conn in from_sched:
            while conn.poll():
                m = conn.recv()
                if m[0] == "out":
                    handle_batch_output(m[1], states, rtruth)
                elif m[0] == "abort_out":
                    rid = m[1]
                    st = states.pop(rid, None)
                    if st is not None:  # _handle_abort_req
                        st.finished = True
                        st.time_stats.set_finished_time()
                        rtruth[rid]["finished_ns"] = ns(st.time_stats.finished_time)
                        rtruth[rid]["finish_reason"] = {"type": "abort", "message": "Abort in waiting queue"}
                        rtruth[rid]["output_tokens"] = st.out
                elif m[0] == "truth":
                    got_truth.append(m[1])
        for p in plans:
            rid = rid_for(sc.name, p.key)
            st = states.get(rid)
            if st is not None and p.abort_after_tokens is not None and st.out >= p.abort_after_tokens:
                send_abort(rid)

        if not done and not pending and not states:
            done = True
            shutdown_at = time.perf_counter() + 0.6
        if done and shutdown_at is not None and time.perf_counter() >= shutdown_at:
            to_sched.send(("shutdown",))
            shutdown_at = None
        if done and len(got_truth) >= expected_truths:
            break
        time.sleep(0.0002)
    flush_tracing()
    truth["ranks"] = got_truth


def handle_batch_output(recs: List[OutRec], states: Dict[str, _State], rtruth: dict) -> None:
    for rec in recs:
        st = states.get(rec.rid)
        if st is None:
            continue
        st.out += rec.new_tokens
        st.finished = rec.finished_reason is not None
        sched_stats = pickle.loads(rec.time_stats)
        recv_obj = _RecvObj([rec.completion_tokens], [rec.prompt_tokens], [rec.cached_tokens],
                            [rec.finished_reason], [sched_stats])
        tr = rtruth[rec.rid]
        if FINISH_TAKES_ATTRS:
            first_output_time = None
            if st.time_stats.first_token_time == 0.0:
                first_output_time = time.perf_counter()
                st.time_stats.set_first_token_time(
                    ts=get_scheduler_first_token_time(st, recv_obj, 0) or first_output_time
                )
                st.time_stats.set_last_time(ts=first_output_time)
                tr["tokenizer_first_output_ns"] = ns(first_output_time)
            if st.finished:
                span_attrs = (
                    convert_to_span_attrs(_TM(), st, recv_obj, 0)
                    if st.time_stats.trace_ctx.tracing_enable
                    else None
                )
                st.time_stats.set_finished_time(ts=first_output_time, span_attrs=span_attrs)
        else:
            if st.time_stats.first_token_time == 0.0:
                st.time_stats.set_first_token_time()
                tr["tokenizer_first_output_ns"] = ns(st.time_stats.first_token_time)
            if st.finished:
                st.time_stats.trace_ctx.trace_set_root_attrs(convert_to_span_attrs(_TM(), st, recv_obj, 0))
                st.time_stats.set_finished_time()
        if st.finished:
            tr["finished_ns"] = ns(st.time_stats.finished_time)
            tr["tokenizer_first_token_ns"] = ns(st.time_stats.first_token_time)
            tr["finish_reason"] = rec.finished_reason
            tr["output_tokens"] = rec.completion_tokens
            del states[rec.rid]


# --- orchestration -------------------------------------------------------------


def start_receiver(out: str):
    ready = os.path.join(out, ".ports.json")
    if os.path.exists(ready):
        os.remove(ready)
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "receiver.py"), "--out", out, "--ready-file", ready],
    )
    for _ in range(600):
        if os.path.exists(ready):
            with open(ready) as f:
                ports = json.load(f)
            os.remove(ready)
            return proc, ports
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("receiver did not start")


def run(sc: Scenario, out: str) -> dict:
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        if f.endswith(".pb") or f in ("spans.jsonl", "bodies.jsonl", "truth.json"):
            os.remove(os.path.join(out, f))
    recv, ports = start_receiver(out)
    try:
        os.environ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = sc.protocol
        if sc.protocol == "grpc":
            endpoint = f"127.0.0.1:{ports['grpc']}"
        else:
            endpoint = f"http://127.0.0.1:{ports['http']}/v1/traces"
        ctx = mp.get_context("spawn")
        procs = []
        to_first, from_tok = ctx.Pipe(duplex=False)  # tokenizer -> scheduler/DPC
        from_sched = []
        if sc.dp > 1:
            outs, ins = [], []
            for _ in range(sc.dp):
                r, w = ctx.Pipe(duplex=False)
                ins.append(r)
                outs.append(w)
            r_tok, w_tok = ctx.Pipe(duplex=False)
            from_sched.append(r_tok)
            procs.append(ctx.Process(target=dp_controller_main,
                                     args=(sc, endpoint, to_first, outs, w_tok)))
            for d in range(sc.dp):
                r_o, w_o = ctx.Pipe(duplex=False)
                from_sched.append(r_o)
                procs.append(ctx.Process(target=scheduler_main,
                                         args=(sc, endpoint, ins[d], w_o, 0, d)))
        elif sc.tp > 1:
            r_o0, w_o0 = ctx.Pipe(duplex=False)
            r_o1, w_o1 = ctx.Pipe(duplex=False)
            r_b, w_b = ctx.Pipe(duplex=False)  # broadcast TP0 -> TP1
            from_sched += [r_o0, r_o1]
            procs.append(ctx.Process(target=scheduler_main,
                                     args=(sc, endpoint, to_first, w_o0, 0, None, w_b, None)))
            procs.append(ctx.Process(target=scheduler_main,
                                     args=(sc, endpoint, None, w_o1, 1, None, None, r_b)))
        else:
            r_o, w_o = ctx.Pipe(duplex=False)
            from_sched.append(r_o)
            procs.append(ctx.Process(target=scheduler_main,
                                     args=(sc, endpoint, to_first, w_o, 0, None)))
        for p in procs:
            p.start()
        for conn in from_sched:  # launch_server waits for every scheduler's init info
            if not conn.poll(120):
                raise SystemExit("a scheduler process did not start")
            assert conn.recv() == ("ready",)
        truth: dict = {
            "sglang_version": SGLANG_VERSION,
            "scenario": sc.name,
            "about": sc.about,
            "server_args": {
                "enable_trace": True,
                "otlp_traces_protocol": sc.protocol,
                "disable_overlap_schedule": not sc.overlap,
                "enable_mixed_chunk": sc.mixed_chunk,
                "chunked_prefill_size": CHUNKED_PREFILL_SIZE,
                "dp_size": sc.dp,
                "tp_size": sc.tp,
                "max_running_requests": sc.max_running,
                "stream_interval": 1,
                "enable_metrics": False,
                "served_model_name": MODEL_NAME,
                "trace_level": 3,
            },
            "requests": {},
        }
        tokenizer_main(sc, endpoint, from_tok, from_sched, truth)
        for p in procs:
            p.join(timeout=30)
    finally:
        time.sleep(0.3)
        recv.terminate()
        recv.wait(timeout=10)
    return truth


def finalize(truth: dict) -> dict:
    """Merge what the schedulers recorded into one document per request."""
    ranks = sorted(truth.pop("ranks"), key=lambda r: r["rank"])
    batches = []
    dispatched = {}
    for r in ranks:
        if r["rank"] == "dp_controller":
            dispatched = r["dispatched"]
            continue
        batches += r["batches"]
    batches.sort(key=lambda b: b["schedule_ns"])
    reqs = []
    for rid, tr in truth["requests"].items():
        tr["schedulers"] = []
        for r in ranks:
            if r["rank"] == "dp_controller" or rid not in r["reqs"]:
                continue
            s = r["reqs"][rid]
            tr["schedulers"].append(s)
        if rid in dispatched:
            tr["dp_rank"] = dispatched[rid]
        main = tr["schedulers"][0] if tr["schedulers"] else None
        if main is not None:
            tr["token_times_ns"] = [t["ns"] for t in main["tokens"]]
            tr["prefill_chunks"] = main["prefill_chunks"]
            if main["tokens"]:
                tr["scheduler_first_token_ns"] = main["tokens"][0]["ns"]
        reqs.append(tr)
    reqs.sort(key=lambda t: t["created_ns"])
    truth["requests"] = reqs
    truth["batches"] = batches
    truth["notes"] = [
        "All times are epoch ns. Scheduler and tokenizer stamps are perf_counter() values "
        "converted as SGLang converts them (convert_time_to_realtime_ns), so they match span "
        "times to the ns except where SGLang uses time.time_ns() (thread-span starts, abort()).",
        "token_times_ns: one per output token, the time the scheduler processed the result of "
        "the batch that produced it (set_prefill_finished_time / set_last_decode_finish_time). "
        "schedulers[*].tokens also gives the batch id of each.",
        "prefill_chunks[*]: start_ns/end_ns are the bounds SGLang gives the chunked_prefill span "
        "(forward entry or previous chunk's result -> this chunk's result); schedule_ns is when "
        "the batch holding the chunk was scheduled.",
        "batches[*].forward_mode is the schedule event's attribute; sglang_forward_mode the "
        "ForwardMode the batch had. members = batch.reqs (batch_size); produced = requests that "
        "got a token from this batch.",
    ]
    return truth


def main() -> int:
    ap = argparse.ArgumentParser(description="Run SGLang's tracing for one scenario.")
    ap.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    sc = SCENARIOS[args.scenario]
    truth = finalize(run(sc, args.out))
    with open(os.path.join(args.out, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")
    n = sum(1 for _ in open(os.path.join(args.out, "spans.jsonl")))
    print(f"{sc.name}: {len(truth['requests'])} requests, {len(truth['batches'])} batches, "
          f"{n} export bodies -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
