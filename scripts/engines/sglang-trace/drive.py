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

The scheduler is server_model.py's small model of SGLang's (shared with
drive_053.py): a waiting queue, a running batch, chunked prefill, optional mixed
chunks, retraction under KV pressure, aborts, and the two event loops
(``event_loop_overlap``, the default, which launches batch k+1 before it
processes the result of batch k; and ``event_loop_normal`` for
--disable-overlap-schedule). The model's forward pass is a sleep of a few ms on
a simulated GPU timeline. This file makes every tracing call at the point where
SGLang's scheduler, batch-result processor, tokenizer manager and DP controller
make it (line numbers below are for 0.5.23):

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

import gc
import importlib.metadata
import inspect
import json
import os
import pickle
import sys
import time
from dataclasses import dataclass
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import server_model as model  # noqa: E402
import sgl_stubs  # noqa: E402
from server_model import MODEL_NAME, OutRec, Scenario, SimReq, TokenizedReq, flush_tracing  # noqa: E402

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
# it one more (wasted) decode step (server_model.Scheduler).
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


def ns(perf_ts: float) -> int:
    """A perf_counter() stamp as SGLang writes it into spans."""
    return rts.convert_time_to_realtime_ns(perf_ts)


SCENARIOS = model.SCENARIOS


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


# --- the scheduler: server_model's, with this release's tracing calls ---------


_FORWARD_MODES = {"extend": ForwardMode.EXTEND, "mixed": ForwardMode.MIXED, "decode": ForwardMode.DECODE}


class Batch(model.Batch):
    @property
    def forward_mode(self):  # the attribute set_schedule_time_batch reads
        return _FORWARD_MODES[self.mode]


class Scheduler(model.Scheduler):
    Batch = Batch
    FINISH_ABORT, FINISH_LENGTH, FINISH_MATCHED_TOKEN = FINISH_ABORT, FINISH_LENGTH, FINISH_MATCHED_TOKEN
    SKIP_FINISHING_DECODE = SKIP_FINISHING_DECODE

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.sched_probe: List[tuple] = []

    def now_ns(self) -> int:
        return ns(time.perf_counter())

    def epoch_ns(self, perf_ts: float) -> int:
        return ns(perf_ts)

    # -- input --
    def handle_generate_request(self, t: TokenizedReq) -> None:
        api_stats = pickle.loads(t.carried)  # unwrap_pickle_fields
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

    # -- scheduling --
    def scheduled(self, batch: Batch) -> dict:
        n0 = len(self.sched_probe)
        rts.set_schedule_time_batch(batch)  # SGLang's own: bid, batch_size, forward_mode
        ts, attrs = self.sched_probe[n0]
        return {
            "rank": self.rank_name,
            "bid": attrs["bid"],
            "forward_mode": attrs.get("forward_mode"),
            "sglang_forward_mode": batch.forward_mode.name,
            "batch_size": attrs["batch_size"],
            "schedule_ns": ns(ts),
            "members": [r.rid for r in batch.reqs],
            "prefill_tokens": dict(batch.take),
            "decode_rows": [r.rid for r in (batch.decoding if batch.is_mixed() else
                                            (batch.reqs if batch.is_decode() else []))],
            "produced": [],
        }

    def forward_entry(self, can_run: List[SimReq]) -> None:
        rts.set_time_batch(can_run, "set_forward_entry_time")
        for r in can_run:
            rec = self.reqs[r.rid]
            if "forward_entry_ns" not in rec:
                rec["forward_entry_ns"] = ns(r.time_stats.forward_entry_time)

    # -- results --
    def _token(self, req: SimReq, ts: float, batch: Batch) -> None:
        req.output.append(len(req.output))
        self.reqs[req.rid]["tokens"].append({"ns": ns(ts), "bid": batch.truth["bid"]})
        batch.truth["produced"].append(req.rid)
        self._update_finish_state(req)

    def completion_ns(self, req: SimReq) -> int:
        ts = time.perf_counter()
        req.time_stats.set_completion_time(ts)
        return ns(ts)

    def time_stats_of(self, req: SimReq) -> bytes:
        return pickle.dumps(req.time_stats)

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
            stats = rts.DPControllerReqTimeStats.new_from_obj(pickle.loads(t.carried))
            stats.set_dp_dispatch_time()
            t.carried = pickle.dumps(stats)
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
class _State:  # stands for ReqState
    obj: model.GenerateReqInput
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
    rtruth = truth["requests"]

    def arrive(p: model.ReqPlan, rid: str) -> _State:
        created = time.perf_counter()  # obj.received_time
        stats = rts.APIServerReqTimeStats(disagg_mode=DisaggregationMode.NULL)
        stats.init_trace_ctx(rid, None, None)
        stats.set_created_time(created)
        span_ctx = stats.trace_ctx.root_span.get_span_context()
        st = _State(model.GenerateReqInput(rid, p.stream, dict(p.sampling)), stats)
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
        return st

    def abort_out(rid: str, st: _State) -> None:  # _handle_abort_req
        st.finished = True
        st.time_stats.set_finished_time()
        rtruth[rid]["finished_ns"] = ns(st.time_stats.finished_time)
        rtruth[rid]["finish_reason"] = {"type": "abort", "message": "Abort in waiting queue"}
        rtruth[rid]["output_tokens"] = st.out

    truth["ranks"] = model.tokenizer_loop(
        sc, to_sched, from_sched, rtruth, arrive=arrive,
        on_output=lambda recs, states: handle_batch_output(recs, states, rtruth),
        on_abort_out=abort_out, now_ns=lambda: ns(time.perf_counter()))
    flush_tracing()


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


def run(sc: Scenario, out: str) -> dict:
    truth: dict = {
        "sglang_version": SGLANG_VERSION,
        "scenario": sc.name,
        "about": sc.about,
        "server_args": {
            "enable_trace": True,
            "otlp_traces_protocol": sc.protocol,
            "disable_overlap_schedule": not sc.overlap,
            "enable_mixed_chunk": sc.mixed_chunk,
            "chunked_prefill_size": model.CHUNKED_PREFILL_SIZE,
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
    return model.run_scenario(sc, out, sc.protocol, truth, tokenizer_main=tokenizer_main,
                              scheduler_main=scheduler_main, dp_controller_main=dp_controller_main)


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
    return model.main("Run SGLang's tracing for one scenario.", SCENARIOS, run, finalize,
                      lambda truth: json.dumps(truth, indent=1))


if __name__ == "__main__":
    sys.exit(main())
