"""The SGLang server around the tracing calls: what drive.py (0.5.10+) and drive_053.py (0.5.3-0.5.9) model alike.

No tracing call is made here. Each driver subclasses `Scheduler` and passes callbacks to `tokenizer_loop`, and
those make its release's tracing calls at the points where SGLang makes them:

  ReqPlan, Scenario, SCENARIOS   the scenarios (requests and server arguments); a driver may reword `about` or add
                                 scenarios (`scenarios()`)
  rid_for                        the fixed rid of a scenario's request
  TokenizedReq, OutRec           the messages between the tokenizer and the schedulers
  SimReq, Batch, Scheduler       the scheduler model: a waiting queue, a running batch, chunked prefill, mixed
                                 chunks, retraction under KV pressure, aborts, and the two event loops
                                 (`event_loop_overlap`, the default, which launches batch k+1 before it processes
                                 the result of batch k; `event_loop_normal` for --disable-overlap-schedule). The
                                 model's forward pass is a sleep of a few ms on a simulated GPU timeline.
  tokenizer_loop                 the tokenizer's loop: arrivals on schedule, client aborts, outputs, shutdown
  run_scenario, main             the OTLP receiver (../otlp_receiver.py), the processes started with
                                 multiprocessing's spawn method as launch_server starts them, the command line

It imports nothing of SGLang, so it can be imported before sgl_stubs has put its stand-ins in place.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
RECEIVER = os.path.join(HERE, "..", "otlp_receiver.py")

MODEL_NAME = "Qwen/Qwen3-0.6B"  # a served model name; no model is loaded
CHUNKED_PREFILL_SIZE = 4096
FORCE_STREAM_INTERVAL = 50  # SGLANG_FORCE_STREAM_INTERVAL / DEFAULT_FORCE_STREAM_INTERVAL default


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
    protocol: str = "grpc"  # OTEL_EXPORTER_OTLP_TRACES_PROTOCOL wanted: grpc | http/protobuf (0.5.3: grpc only)
    max_running: int = 64
    kv_capacity: int = 10_000_000
    new_token_ratio: float = 0.7  # share of max_new tokens reserved on admission
    metrics: bool = False  # --enable-metrics (0.5.9: the tokenizer then stamps first_token_time)


def three() -> List[ReqPlan]:
    """A streaming request that ends on EOS, a streaming one that stops at its length limit, and a 9000-token
    non-streaming prompt prefilled in chunks."""
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
            three(),
            overlap=True,
            protocol="grpc",
        ),
        Scenario(
            "no-overlap",
            "same requests with --disable-overlap-schedule; exported over OTLP/HTTP",
            three(),
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


def scenarios(about: Optional[Dict[str, str]] = None, extra: List[Scenario] = ()) -> Dict[str, Scenario]:
    """SCENARIOS with some `about` texts reworded and some scenarios added."""
    out = {name: dataclasses.replace(sc, about=(about or {}).get(name, sc.about)) for name, sc in SCENARIOS.items()}
    for sc in extra:
        out[sc.name] = sc
    return out


def rid_for(scenario: str, key: str) -> str:
    # SGLang's rids are uuid4().hex; these are fixed so reruns keep them.
    return hashlib.md5(f"tokenscope/{scenario}/{key}".encode()).hexdigest()


# --- messages between processes ----------------------------------------------


@dataclass
class TokenizedReq:
    """Stands for TokenizedGenerateReqInput: what the scheduler model needs, and what the tokenizer's tracing
    hands the scheduler with the request (`carried`): 0.5.10+ the pickled APIServerReqTimeStats (as
    wrap_pickle_fields keeps it), 0.5.3-0.5.9 the trace_context dict trace_get_proc_propagate_context returned."""

    rid: str
    prompt: int
    max_new: int
    eos_at: Optional[int]
    stream: bool
    carried: Any


@dataclass
class OutRec:
    """One row of a BatchStrOutput."""

    rid: str
    new_tokens: int
    finished_reason: Optional[dict]
    completion_tokens: int
    prompt_tokens: int
    cached_tokens: int
    time_stats: Optional[bytes] = None  # 0.5.10+: pickled SchedulerReqTimeStats (its __getstate__ decides what goes)


def flush_tracing() -> None:
    from opentelemetry import trace as ot

    provider = ot.get_tracer_provider()
    provider.force_flush()
    provider.shutdown()


# --- the scheduler model ------------------------------------------------------


class SimReq:
    def __init__(self, t: TokenizedReq, time_stats=None):
        self.rid = t.rid
        self.prompt = t.prompt
        self.max_new = t.max_new
        self.eos_at = t.eos_at
        self.stream = t.stream
        self.time_stats = time_stats  # 0.5.10+: the request's SchedulerReqTimeStats
        self.output: List[int] = []  # indexes into truth token list
        self.prefilled = 0  # tokens with KV computed
        self.kv = 0  # KV tokens held
        self.finished_reason: Optional[dict] = None
        self.to_finish: Optional[dict] = None  # 0.5.3: to_abort; later: to_finish
        self.finished_output = False
        self.inflight_middle_chunks = 0  # Req.is_chunked
        self.is_retracted = False
        self.send_offset = 0

    def fill_len(self) -> int:
        return self.prompt + len(self.output)

    def finished(self) -> bool:
        return self.finished_reason is not None


@dataclass
class Batch:
    mode: str  # extend | mixed | decode
    reqs: List[SimReq]
    take: Dict[str, int] = field(default_factory=dict)  # rid -> prefill tokens this batch
    decoding: List[SimReq] = field(default_factory=list)  # decode rows of a MIXED batch
    done_at: float = 0.0
    truth: Optional[dict] = None

    # ForwardMode's predicates
    def is_extend(self) -> bool:
        return self.mode in ("extend", "mixed")

    def is_decode(self) -> bool:
        return self.mode == "decode"

    def is_mixed(self) -> bool:
        return self.mode == "mixed"


class Scheduler:
    """The scheduler model. A driver's subclass sets the FINISH_* classes (SGLang's own) and makes the tracing
    calls in the methods marked "driver"."""

    Batch = Batch
    FINISH_ABORT: Any = None
    FINISH_LENGTH: Any = None
    FINISH_MATCHED_TOKEN: Any = None
    # 0.5.23's overlap loop leaves out of the next decode batch a request whose queued result reaches
    # max_new_tokens (_reqs_finishing_inflight); earlier releases run it one more (wasted) decode step.
    SKIP_FINISHING_DECODE = False

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

    # -- driver: times and tracing --
    def now_ns(self) -> int:
        """The time of an abort, as truth.json writes it."""
        raise NotImplementedError

    def epoch_ns(self, perf_ts: float) -> int:
        """A perf_counter() stamp of the simulated GPU timeline, as truth.json writes it."""
        raise NotImplementedError

    def received(self, msgs: list) -> None:
        """recv_requests, after the TP broadcast: every message this rank got."""

    def handle_generate_request(self, t: TokenizedReq) -> None:
        raise NotImplementedError

    def _add_request_to_queue(self, req: SimReq, is_retracted: bool = False) -> None:
        raise NotImplementedError

    def scheduled(self, batch: Batch) -> dict:
        """get_next_batch_to_run's result: the tracing call, and the batch's truth."""
        raise NotImplementedError

    def forward_entry(self, can_run: List[SimReq]) -> None:
        """_get_new_batch_prefill_raw, once the requests of a prefill batch are chosen."""

    def completion_ns(self, req: SimReq) -> int:
        """A finished request's KV is released: set_completion_time, and its time for truth.json."""
        raise NotImplementedError

    def time_stats_of(self, req: SimReq) -> Optional[bytes]:
        """What an output row carries of the request's time stats."""
        return None

    def process_batch_result_prefill(self, batch: Batch) -> None:
        raise NotImplementedError

    def process_batch_result_decode(self, batch: Batch) -> None:
        raise NotImplementedError

    # -- input: recv_requests + process_input_requests --
    def ingest_requests(self, block: bool) -> None:
        if self.leader is not None:
            msgs = self.leader.recv()  # broadcast_pyobj from TP rank 0
        else:
            msgs = []
            if block:
                self.conn_in.poll(0.001)
            while self.conn_in.poll():
                msgs.append(self.conn_in.recv())
            if self.follower is not None:
                self.follower.send(msgs)
        self.received(msgs)
        for m in msgs:
            kind = m[0]
            if kind == "req":
                self.handle_generate_request(m[1])
            elif kind == "abort":
                self.abort_request(m[1])
            elif kind == "shutdown":
                self.stopping = True

    def abort_request(self, rid: str) -> None:
        for i in reversed(range(len(self.waiting))):
            req = self.waiting[i]
            if req.rid.startswith(rid):
                # Abort method 1: pop from the queue; the tokenizer is told with an AbortReq. No tracing call:
                # 0.5.10+ closes the trace context in TraceReqContext.__del__ when the Req is freed (the `del`
                # below drops the last reference); 0.5.3-0.5.9 leave it open in trace.reqs_context, never exported.
                self.waiting.pop(i)
                self.reqs[rid]["aborted"] = {"where": "waiting_queue", "ns": self.now_ns()}
                if self.tp_rank == 0:
                    self.conn_out.send(("abort_out", rid))
                del req
        for req in self._inflight():
            if not req.finished() and req.rid.startswith(rid):
                # Abort method 3: set to_finish; the next forward finishes it.
                req.to_finish = self.FINISH_ABORT().to_json()
                self.reqs[rid]["aborted"] = {"where": "running", "ns": self.now_ns()}

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
        if lb is not None and lb.is_extend():
            for r in lb.reqs:
                if not r.finished() and id(r) not in exclude and r not in self.running:
                    self.running.append(r)
        self.running = [r for r in self.running if not r.finished()]

        batch = self.get_new_batch_prefill()
        if batch is None and self.running:
            batch = self.update_running_batch()
        if batch is not None:
            batch.truth = self.scheduled(batch)
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
        self.forward_entry(can_run)
        for r in can_run:
            r.is_retracted = False  # prepare_for_extend
            r.prefilled += take[r.rid]
            r.kv += take[r.rid]
            self.kv_used += take[r.rid]
        batch = self.Batch("extend", can_run, take)
        if self.sc.mixed_chunk and self.running:
            finishing = self._reqs_finishing_inflight(self.running)
            self.running = [r for r in self.running if r not in finishing]
            if self.running:
                batch.mode = "mixed"
                batch.decoding = list(self.running)
                batch.reqs = can_run + self.running
                for r in self.running:
                    r.kv += 1
                    self.kv_used += 1
                self.running = []
        return batch

    def _reqs_finishing_inflight(self, reqs: List[SimReq]) -> List[SimReq]:
        if not (self.sc.overlap and self.SKIP_FINISHING_DECODE and self.result_queue):
            return []
        queued = self.result_queue[0].reqs
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
        return self.Batch("decode", list(self.running))

    # -- the model's forward pass --
    def run_batch(self, batch: Batch) -> None:
        if batch.is_decode():
            dur = 0.004 + 0.0003 * len(batch.reqs)
        else:
            dur = 0.002 + 0.0000025 * sum(batch.take.values()) + 0.0003 * len(batch.decoding)
        now = time.perf_counter()
        start = max(now, self.gpu_free)
        batch.done_at = start + dur
        self.gpu_free = batch.done_at
        batch.truth["gpu_start_ns"] = self.epoch_ns(start)
        batch.truth["gpu_end_ns"] = self.epoch_ns(batch.done_at)

    # -- results --
    def process_batch_result(self, batch: Batch) -> None:
        wait = batch.done_at - time.perf_counter()
        if wait > 0:
            time.sleep(wait)  # result.copy_done.synchronize()
        if batch.is_extend():
            self.process_batch_result_prefill(batch)
        else:
            self.process_batch_result_decode(batch)

    def _update_finish_state(self, req: SimReq) -> None:
        if req.to_finish is not None:
            req.finished_reason, req.to_finish = req.to_finish, None
        elif len(req.output) >= req.max_new:
            req.finished_reason = self.FINISH_LENGTH(req.max_new).to_json()
        elif req.eos_at is not None and len(req.output) >= req.eos_at:
            req.finished_reason = self.FINISH_MATCHED_TOKEN(151645).to_json()  # an EOS id

    def _release(self, req: SimReq) -> None:
        self.kv_used -= req.kv
        req.kv = 0
        rec = self.reqs[req.rid]
        rec["completion_ns"] = self.completion_ns(req)
        rec["finish_reason"] = req.finished_reason

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
                time_stats=self.time_stats_of(req),
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
                self.result_queue.append(batch)
            if self.last_batch is not None:
                self.process_batch_result(self.result_queue.popleft())
            self.last_batch = batch

    def run(self) -> dict:
        if self.sc.overlap:
            self.event_loop_overlap()
        else:
            self.event_loop_normal()
        return {"rank": self.rank_name, "batches": self.batches, "reqs": self.reqs}


# --- the tokenizer (main process) ----------------------------------------------


@dataclass
class GenerateReqInput:  # stands for GenerateReqInput: what convert_to_span_attrs reads
    rid: str
    stream: bool
    sampling_params: dict


def tokenizer_loop(sc: Scenario, to_sched, from_sched: list, rtruth: dict, *,
                   arrive: Callable[[ReqPlan, str], Any],
                   on_output: Callable[[List[OutRec], dict], None],
                   on_abort_out: Callable[[str, Any], None],
                   now_ns: Callable[[], int]) -> list:
    """The tokenizer manager's loop until every scheduler has stopped; returns what the schedulers sent back.

    arrive(plan, rid) -> state      a request arrives (generate_request, tokenize, _send_one_request)
    on_output(recs, states)         the schedulers' output rows (_handle_batch_output)
    on_abort_out(rid, state)        a request aborted in a waiting queue (_handle_abort_req)
    now_ns()                        the time of a client abort, for truth.json

    A state has `out` (tokens received), `finished` and `abort_sent`."""
    plans = sorted(sc.requests, key=lambda p: p.at_ms)
    states: Dict[str, Any] = {}
    t0 = time.perf_counter() + 0.05
    pending = list(plans)
    waits = []  # (t, rid) aborts planned by time
    got_truth = []
    done = False
    shutdown_at = None

    def send_abort(rid):  # TokenizerManager.abort_request
        st = states.get(rid)
        if st is None or st.abort_sent:
            return
        st.abort_sent = True
        rtruth[rid]["client_abort_ns"] = now_ns()
        to_sched.send(("abort", rid))

    while True:
        now = time.perf_counter()
        # arrivals
        while pending and now >= t0 + pending[0].at_ms / 1000:
            p = pending.pop(0)
            rid = rid_for(sc.name, p.key)
            states[rid] = arrive(p, rid)
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
                    on_output(m[1], states)
                elif m[0] == "abort_out":
                    st = states.pop(m[1], None)
                    if st is not None:
                        on_abort_out(m[1], st)
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
        if done and len(got_truth) >= len(from_sched):
            break
        time.sleep(0.0002)
    return got_truth


# --- orchestration -------------------------------------------------------------


def start_receiver(out: str):
    ready = os.path.join(out, ".ports.json")
    if os.path.exists(ready):
        os.remove(ready)
    proc = subprocess.Popen([sys.executable, RECEIVER, "--layout", "sglang", out, ready])
    for _ in range(600):
        if os.path.exists(ready):
            with open(ready) as f:
                ports = json.load(f)
            os.remove(ready)
            return proc, ports
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("receiver did not start")


def run_scenario(sc: Scenario, out: str, protocol: str, truth: dict, *, tokenizer_main, scheduler_main,
                 dp_controller_main) -> dict:
    """Start the receiver and the processes of `sc` (a DP controller and a scheduler per DP rank, two TP
    schedulers, or one scheduler), run the tokenizer here, and return `truth` as the tokenizer left it.

    scheduler_main(sc, endpoint, conn_in, conn_out, tp_rank, dp_rank[, follower, leader]),
    dp_controller_main(sc, endpoint, conn_in, outs, conn_tok) and
    tokenizer_main(sc, endpoint, to_sched, from_sched, truth) are the driver's."""
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        if f.endswith(".pb") or f in ("spans.jsonl", "bodies.jsonl", "truth.json"):
            os.remove(os.path.join(out, f))
    recv, ports = start_receiver(out)
    try:
        os.environ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = protocol
        if protocol == "grpc":
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
            procs.append(ctx.Process(target=dp_controller_main, args=(sc, endpoint, to_first, outs, w_tok)))
            for d in range(sc.dp):
                r_o, w_o = ctx.Pipe(duplex=False)
                from_sched.append(r_o)
                procs.append(ctx.Process(target=scheduler_main, args=(sc, endpoint, ins[d], w_o, 0, d)))
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
            procs.append(ctx.Process(target=scheduler_main, args=(sc, endpoint, to_first, w_o, 0, None)))
        for p in procs:
            p.start()
        for conn in from_sched:  # launch_server waits for every scheduler's init info
            if not conn.poll(120):
                raise SystemExit("a scheduler process did not start")
            assert conn.recv() == ("ready",)
        tokenizer_main(sc, endpoint, from_tok, from_sched, truth)
        for p in procs:
            p.join(timeout=30)
    finally:
        time.sleep(0.3)
        recv.terminate()
        recv.wait(timeout=10)
    return truth


def main(description: str, scenarios: Dict[str, Scenario], run: Callable[[Scenario, str], dict],
         finalize: Callable[[dict], dict], dumps: Callable[[dict], str]) -> int:
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--scenario", required=True, choices=sorted(scenarios))
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    sc = scenarios[args.scenario]
    truth = finalize(run(sc, args.out))
    with open(os.path.join(args.out, "truth.json"), "w") as f:
        f.write(dumps(truth) + "\n")
    n = sum(1 for _ in open(os.path.join(args.out, "spans.jsonl")))
    print(f"{sc.name}: {len(truth['requests'])} requests, {len(truth['batches'])} batches, "
          f"{n} export bodies -> {args.out}", file=sys.stderr)
    return 0
