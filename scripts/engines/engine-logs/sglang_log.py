"""Writes an SGLang server log made by SGLang's own logging code, with known stats values.

    python sglang_log.py SCENARIO OUT_BASE      (run with the interpreter of an SGLang venv)

writes OUT_BASE.log and OUT_BASE.truth.json. Scenarios:

  single   `python -m sglang.launch_server --model-path M` (tp 1, dp 1): no rank prefix
  spec     the same with EAGLE speculative decoding (`--speculative-algorithm EAGLE
           --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4`):
           decode lines carry "accept len" (and, from 0.5.9, "accept rate")
  dp2      `--tp 2 --dp 2 --enable-dp-attention`: two scheduler processes that both log,
           prefixes " DP0 TP0" and " DP1 TP1"
  pd       prefill/decode disaggregation: a `--disaggregation-mode prefill` and a
           `--disaggregation-mode decode` server, both `--enable-request-time-stats-logging`, six
           requests through the mini load balancer (one KV transfer 400 ms, the others 5-20 ms);
           writes OUT_BASE-prefill.log, OUT_BASE-decode.log (each with its own .truth.json in the
           schema of the others) and OUT_BASE.truth.json (the pair, joined by bootstrap_room).
           See pd_main() for what of SGLang runs there.

What runs is SGLang's, cut out of the installed files with `ast` and executed as written
(the modules themselves import torch): configure_logger and set_uvicorn_logging_configs
(srt/utils/common.py), the logger-prefix statements of the scheduler process function,
the stats functions (0.5.3/0.5.9: SchedulerMetricsMixin.log_prefill_stats /
log_decode_stats / update_spec_metrics; 0.5.10: SchedulerMetricsMixin.report_prefill_stats /
report_decode_stats in srt/observability/; 0.5.23: SchedulerMetricsReporter.report_prefill_stats
/ report_decode_stats in managers/scheduler_components/metrics_reporter.py), the token-usage
functions they call (_get_token_info; 0.5.23: SchedulerPoolStatsObserver.get_pool_stats and
PoolStats), PrefillStats, QueueCount, DisaggregationMode, SpeculativeAlgorithm, and the module
constants those functions read (RECORD_STEP_TIME, LOG_FORWARD_ITERS, ...) evaluated from their
source lines with SGLang's own sglang.srt.environ. Uvicorn's lines go through uvicorn's own
config/formatters as modified by set_uvicorn_logging_configs; the access line is issued
with the exact call of uvicorn/protocols/http/h11_impl.py. Other start-up lines are SGLang's
logger calls re-issued from their source (common.SourceCall) with chosen values.

The scheduler object around the stats functions is a stand-in holding the attributes they
read (waiting queue, running batch, KV pool sizes, counters); the scheduler loop is modelled
here: a decode step adds len(batch.reqs) generated tokens (plus accepted draft tokens with
speculative decoding, through the real update_spec_metrics), increments forward_ct_decode,
and every decode_log_interval (40) steps the decode line is logged, as in the installed
scheduler_output_processor_mixin.py / batch_result_processor.py.
"""

from __future__ import annotations

import ast
import collections
import dataclasses
import enum
import importlib.metadata
import json
import logging
import logging.config
import os
import re
import sys
import types
import typing

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "sglang-trace"))

import time as time_mod  # noqa: E402

import common  # noqa: E402
from common import Proc, Sink, SourceCall, VirtualClock  # noqa: E402

VERSION = importlib.metadata.version("sglang")
SCENARIO = sys.argv[1]
OUT_BASE = sys.argv[2]
for var in list(os.environ):
    if var.startswith("SGLANG_"):
        del os.environ[var]

START = {
    "single": 1762178700.0,  # 2025-11-03 14:05:00 UTC
    "spec": 1762182000.0,  # 2025-11-03 15:00:00 UTC
    "dp2": 1767225560.0,  # 2025-12-31 23:59:20 UTC: the traffic crosses midnight into a new year
    "pd": 1762248600.0,  # 2025-11-04 09:30:00 UTC
}[SCENARIO]
clock = VirtualClock(START)
clock.install()

sink = Sink()
MAIN = Proc(sink, "MainProcess", 3101)
SCHED = [Proc(sink, "scheduler0", 3178), Proc(sink, "scheduler1", 3179)]
MAIN.enter()

import sgl_stubs  # noqa: E402

ROOT = sgl_stubs.sglang_dir()
SRT = os.path.join(ROOT, "srt")
sgl_stubs._package("sglang", ROOT)
_utils = sgl_stubs._package("sglang.srt.utils", os.path.join(SRT, "utils"))
_extra = {"_warned_bool_env_var_keys": set()}
_utils.get_bool_env_var = sgl_stubs.extract("srt/utils/common.py", "get_bool_env_var", dict(_extra))
_utils.get_int_env_var = sgl_stubs.extract("srt/utils/common.py", "get_int_env_var", dict(_extra))
from sglang.srt.environ import envs  # noqa: E402  (real: stdlib + msgspec)

import tqdm as tqdm_mod  # noqa: E402
import uvicorn.config  # noqa: E402
import uvicorn.protocols.utils as uv_utils  # noqa: E402

UVICORN_ROOT = os.path.dirname(uvicorn.config.__file__)


def P(rel: str) -> str:
    return os.path.join(ROOT, rel)


def exists(rel: str) -> bool:
    return os.path.exists(P(rel))


TYPING = {n: getattr(typing, n) for n in ("Any", "Dict", "List", "Optional", "Tuple", "Union", "TYPE_CHECKING")}
BASE_G = dict(TYPING, os=os, sys=sys, json=json, logging=logging, time=time_mod, enum=enum, Enum=enum.Enum,
              IntEnum=enum.IntEnum, auto=enum.auto, dataclasses=dataclasses, dataclass=dataclasses.dataclass,
              field=dataclasses.field, defaultdict=collections.defaultdict, Counter=collections.Counter,
              deque=collections.deque, envs=envs, get_bool_env_var=_utils.get_bool_env_var,
              get_int_env_var=_utils.get_int_env_var)


def extract(rel: str, qualname: str, **g):
    gl = dict(BASE_G)
    gl.update(g)
    gl["__name__"] = "sglang." + rel[:-3].replace("/", ".")
    gl.setdefault("logger", logging.getLogger(gl["__name__"]))
    return common.extract_def(P(rel), qualname, gl)


def module_values(rel: str, names: list[str], **g) -> dict:
    """Evaluate the module-level assignments of `names` in an installed file, as written."""
    tree, _ = common._tree(P(rel))
    ns = dict(BASE_G)
    ns.update(g)
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and getattr(node.targets[0], "id", None) in names:
            expr = ast.Expression(body=node.value)
            out[node.targets[0].id] = eval(compile(expr, P(rel), "eval"), ns)
    return out


# ------------------------------------------------------------------ SGLang pieces
DisaggregationMode = extract("srt/disaggregation/utils.py", "DisaggregationMode")
SPEC_FILE = "srt/speculative/spec_info.py"
SpeculativeAlgorithm = extract(SPEC_FILE, "SpeculativeAlgorithm", Type=typing.Type,
                               CustomSpecAlgo=type("CustomSpecAlgo", (), {}))  # plugin class: unused here

# configure_logger (srt/utils/common.py) and its helpers
configure_logger = extract(
    "srt/utils/common.py", "configure_logger", orjson=json,
    configure_hf_hub_logger=lambda: None, parent_process=lambda: None,
    is_flashinfer_available=lambda: False)
_uv_filter = None
try:
    _uv_filter = extract("srt/utils/common.py", "_configure_uvicorn_access_log_filter")
except common.SourceCallNotFound:
    pass
set_uvicorn_logging_configs = extract("srt/utils/common.py", "set_uvicorn_logging_configs",
                                      _configure_uvicorn_access_log_filter=_uv_filter)

if exists("srt/managers/scheduler_components/metrics_reporter.py"):
    LAYOUT = "0.5.23"
    STATS_FILE = "srt/managers/scheduler_components/metrics_reporter.py"
    STATS_CLASS = "SchedulerMetricsReporter"
    PREFILL_FN, DECODE_FN = "report_prefill_stats", "report_decode_stats"
elif exists("srt/observability/scheduler_metrics_mixin.py"):
    LAYOUT = "0.5.10"
    STATS_FILE = "srt/observability/scheduler_metrics_mixin.py"
    STATS_CLASS = "SchedulerMetricsMixin"
    PREFILL_FN, DECODE_FN = "report_prefill_stats", "report_decode_stats"
else:
    LAYOUT = "0.5.3" if "udpate_spec_metrics" in open(P("srt/managers/scheduler_metrics_mixin.py")).read() else "0.5.9"
    STATS_FILE = "srt/managers/scheduler_metrics_mixin.py"
    STATS_CLASS = "SchedulerMetricsMixin"
    PREFILL_FN, DECODE_FN = "log_prefill_stats", "log_decode_stats"

CONSTS = module_values(STATS_FILE, ["RECORD_STEP_TIME", "LOG_FORWARD_ITERS", "ENABLE_METRICS_DEVICE_TIMER",
                                    "CACHE_HIT_RATE_WINDOW_SECONDS", "GEN_THROUGHPUT_STALENESS_SECONDS"])
QueueCount = None
if LAYOUT in ("0.5.10", "0.5.23"):
    QueueCount = extract("srt/observability/metrics_collector.py", "QueueCount")
PrefillStats = None
if LAYOUT != "0.5.3":
    PrefillStats = extract(STATS_FILE, "PrefillStats", QueueCount=QueueCount)

STATS_G = dict(CONSTS, DisaggregationMode=DisaggregationMode, QueueCount=QueueCount,
               SpeculativeAlgorithm=SpeculativeAlgorithm, PrefillStats=PrefillStats)
if LAYOUT == "0.5.23":
    # server-argument bags of sglang.srt.runtime_context, as a default server publishes them
    DISAGG = types.SimpleNamespace(language_only=False, encoder_transfer_backend="zmq_to_scheduler",
                                   disaggregation_decode_host_receive_threshold=1.0)
    SPEC_BAG = types.SimpleNamespace(speculative_num_draft_tokens=4, speculative_num_steps=3)
    STATS_G.update(get_disagg=lambda: DISAGG, get_spec=lambda: SPEC_BAG)
    # speculative/ragged_verify.py imports torch; its two names used here, cut out of it
    rv = types.ModuleType("sglang.srt.speculative.ragged_verify")
    rv.RaggedVerifyMode = extract("srt/speculative/ragged_verify.py", "RaggedVerifyMode")
    rv.read_ragged_verify_mode = extract("srt/speculative/ragged_verify.py", "read_ragged_verify_mode",
                                         RaggedVerifyMode=rv.RaggedVerifyMode)
    sys.modules["sglang.srt.speculative.ragged_verify"] = rv
    PoolStats = extract("srt/managers/scheduler_components/pool_stats_observer.py", "PoolStats")
    get_pool_stats = extract("srt/managers/scheduler_components/pool_stats_observer.py",
                             "SchedulerPoolStatsObserver.get_pool_stats")
    get_token_info = extract("srt/managers/scheduler_components/pool_stats_observer.py",
                             "SchedulerPoolStatsObserver._get_token_info", PoolStats=PoolStats)
    get_swa_token_info = None
else:
    rel = "srt/managers/scheduler.py" if LAYOUT == "0.5.3" else "srt/managers/scheduler_runtime_checker_mixin.py"
    get_token_info = extract(rel, "Scheduler._get_token_info" if LAYOUT == "0.5.3"
                             else "SchedulerRuntimeCheckerMixin._get_token_info")

prefill_fn = extract(STATS_FILE, f"{STATS_CLASS}.{PREFILL_FN}", **STATS_G)
decode_fn = extract(STATS_FILE, f"{STATS_CLASS}.{DECODE_FN}", **STATS_G)
spec_fn = extract(STATS_FILE, f"{STATS_CLASS}.{'udpate_spec_metrics' if LAYOUT == '0.5.3' else 'update_spec_metrics'}")
publish_fn = None
if LAYOUT != "0.5.23":
    publish_fn = extract(STATS_FILE, f"{STATS_CLASS}._publish_kv_events")

sink.clear()

# ------------------------------------------------------------------ log sources
_SRC_FILES: list[str] = []


def _all_srt_files() -> list[str]:
    if not _SRC_FILES:
        for d, _, fs in os.walk(SRT):
            for f in fs:
                if f.endswith(".py"):
                    _SRC_FILES.append(os.path.relpath(os.path.join(d, f), ROOT))
        _SRC_FILES.sort()
    return _SRC_FILES


def src_call(needle: str, prefer: tuple[str, ...] = ()) -> SourceCall | None:
    """The SGLang logger call containing `needle` (in `prefer` files first, else anywhere in srt/)."""
    for rel in list(prefer) + _all_srt_files():
        if not exists(rel):
            continue
        with open(P(rel), encoding="utf-8") as f:
            if needle not in f.read():
                continue
        try:
            return SourceCall(ROOT, rel, needle, "sglang." + rel[:-3].replace("/", "."))
        except common.SourceCallNotFound:
            continue
    return None


def src_expr(needle: str, prefer: tuple[str, ...], **ns):
    """Evaluate the f-string (JoinedStr) containing `needle` in an installed file."""
    for rel in prefer:
        if not exists(rel):
            continue
        tree, lines = common._tree(P(rel))
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                seg = "\n".join(lines[node.lineno - 1: node.end_lineno])
                if needle in seg:
                    return eval(compile(ast.Expression(body=node), P(rel), "eval"), dict(BASE_G), ns)
    raise common.SourceCallNotFound(needle)


def retract_line(n_retracted: int, gained: int, old_ratio: float, new_ratio: float) -> None:
    """The scheduler's retraction message (KV pool full): 0.5.3 one logger.info(f"..."); later
    releases build msg_prefix / msg_details in the statements before logger.warning(msg_prefix +
    msg_details). Those statements are run as written, then the call."""
    rel = "srt/managers/scheduler.py"
    tree, lines = common._tree(P(rel))
    ns = dict(BASE_G, retracted_reqs=[None] * n_retracted, reqs_to_abort=[], old_ratio=old_ratio,
              new_token_ratio=new_ratio, new_token_gained=gained, kv_full_retract_flag=True,
              mamba_num_gained=None)
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.If, ast.For, ast.With)):
            continue
        body = getattr(fn, "body", [])
        for i, st in enumerate(body):
            seg = "\n".join(lines[st.lineno - 1: st.end_lineno])
            if "KV cache pool is full. Retract requests." not in seg or not isinstance(st, (ast.Expr, ast.Assign)):
                continue
            if isinstance(st, ast.Expr):  # the log call itself (0.5.3)
                SourceCall(ROOT, rel, "KV cache pool is full. Retract requests.", "sglang.srt.managers.scheduler")(**ns)
                return
            # msg_prefix = (...) ...: run up to the logger.warning(...) statement, then issue it
            j = i
            while "logger." not in "\n".join(lines[body[j].lineno - 1: body[j].end_lineno]):
                j += 1
            exec(compile(ast.Module(body=body[i:j], type_ignores=[]), P(rel), "exec"), ns)
            call = body[j].value
            args = common.eval_call_args(P(rel), call, ns)
            common.emit_at(P(rel), common.call_lineno(call), logging.getLogger("sglang.srt.managers.scheduler"),
                           common.call_level(call), args)
            return
    raise common.SourceCallNotFound("retraction message")


def bar_format() -> str:
    """bar_format of the safetensors loader's tqdm: _BAR_FORMAT in model_loader/weight_utils.py
    (0.5.3), BAR_FORMAT in srt/utils/common.py (later; without the trailing newline from 0.5.10)."""
    try:
        return common.module_constant(P("srt/utils/common.py"), "BAR_FORMAT")
    except common.SourceCallNotFound:
        return common.module_constant(P("srt/model_loader/weight_utils.py"), "_BAR_FORMAT")


TORCH_DIST = src_call("Init torch distributed begin.")
LOAD_BEGIN = src_call("Load weight begin.")
LOAD_END = src_call("Load weight end.")
KV_ALLOC = src_call("KV Cache is allocated. #tokens: {num_tokens}, K size")
POOL_END = src_call("Memory pool end.")
MAX_TOTAL = src_call("max_total_num_tokens={self.max_total_num_tokens}, ",
                     ("srt/managers/scheduler.py", "srt/model_executor/model_runner.py"))
TEMPLATE = src_call("Using default HuggingFace chat template with detected content format")
FIRED_UP = src_call("The server is fired up and ready to roll!", ("srt/entrypoints/http_server.py",))
DP_LAUNCH = src_call('Launch DP{dp_rank} starting at GPU #{base_gpu_id}.')
UV_STARTED = SourceCall(UVICORN_ROOT, "server.py", "Started server process [%d]", "uvicorn.error")
UV_WAITING = SourceCall(UVICORN_ROOT, "lifespan/on.py", "Waiting for application startup.", "uvicorn.error")
UV_COMPLETE = SourceCall(UVICORN_ROOT, "lifespan/on.py", "Application startup complete.", "uvicorn.error")
UV_RUNNING = SourceCall(UVICORN_ROOT, "server.py", 'message = f"Uvicorn running on {addr_format}', "uvicorn.error")
UV_ACCESS = SourceCall(UVICORN_ROOT, "protocols/http/h11_impl.py", '%s - "%s %s HTTP/%s" %d', "uvicorn.access")
MODEL_INFO_PATH = "/model_info" if '"/model_info"' in open(P("srt/entrypoints/http_server.py")).read() else "/get_model_info"

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
MAX_TOTAL_TOKENS = 455096 if SCENARIO != "pd" else 40960  # pd: both servers run with --max-total-tokens 40960
truth_lines: list[dict] = []


class LlamaForCausalLM:  # type(self.model).__name__ in "Load weight end."
    pass


# ------------------------------------------------------------------ processes and logging
SERVER_ARGS = types.SimpleNamespace(log_level="info", log_level_http=None, decode_log_interval=40,
                                    tp_size=2 if SCENARIO == "dp2" else 1, dp_size=2 if SCENARIO == "dp2" else 1,
                                    ep_size=1, pp_size=1, attn_cp_size=1, moe_dp_size=1,
                                    enable_dp_attention=SCENARIO == "dp2",
                                    uvicorn_access_log_exclude_prefixes=[], disable_uvicorn_access_log=False,
                                    speculative_num_steps=3 if SCENARIO == "spec" else None,
                                    speculative_num_draft_tokens=4 if SCENARIO == "spec" else None,
                                    language_only=False, encoder_transfer_backend="zmq_to_scheduler",
                                    chunked_prefill_size=8192, enable_metrics=False)
if SCENARIO == "pd":
    # both servers of the pd scenario: --enable-request-time-stats-logging (server_args.py), default
    # transfer backend (mooncake), no decode-side KV offload
    SERVER_ARGS.enable_request_time_stats_logging = True
    SERVER_ARGS.disaggregation_decode_enable_offload_kvcache = False


def scheduler_prefix(dp_rank, tp_rank) -> str:
    """Run the logger-prefix statements of the installed scheduler process function."""
    tree, lines = common._tree(P("srt/managers/scheduler.py"))
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        src = "\n".join(lines[fn.lineno - 1: fn.end_lineno])
        if 'prefix += f" DP' not in src or fn.name not in ("run_scheduler_process", "configure_scheduler_process",
                                                           "_configure_scheduler_worker", "configure_scheduler"):
            continue
        body = fn.body
        i0 = next(i for i, st in enumerate(body) if isinstance(st, ast.Assign)
                  and getattr(st.targets[0], "id", None) == "prefix")
        # plus the assignments / ifs right before it that compute the ranks it shows
        # (0.5.23: parallel = get_parallel(); shown_dp = ...; 0.5.3: SGLANG_DP_RANK fallback)
        while i0 > 0 and isinstance(body[i0 - 1], (ast.Assign, ast.If)):
            i0 -= 1
        stmts = []
        for st in body[i0:]:
            seg = "\n".join(lines[st.lineno - 1: st.end_lineno])
            if "setproctitle" in seg or "configure_logger" in seg or "faulthandler" in seg:
                break
            stmts.append(st)
        mod = ast.Module(body=stmts, type_ignores=[])
        parallel = types.SimpleNamespace(dp_rank=dp_rank, tp_rank=tp_rank, tp_size=SERVER_ARGS.tp_size,
                                         pp_size=1, pp_rank=0, attn_cp_size=1, attn_cp_rank=0, moe_dp_size=1,
                                         moe_dp_rank=0, ep_size=1, moe_ep_rank=0)
        ns = dict(server_args=SERVER_ARGS, dp_rank=dp_rank, tp_rank=tp_rank, pp_rank=0, attn_cp_rank=0,
                  moe_dp_rank=0, moe_ep_rank=0, display_dp_rank=None, display_tp_rank=None,
                  display_moe_ep_rank=None, get_parallel=lambda: parallel, os=os)
        exec(compile(mod, P("srt/managers/scheduler.py"), "exec"), ns)
        return ns["prefix"]
    raise common.SourceCallNotFound("scheduler prefix")


def enter(proc: Proc, prefix: str | None) -> None:
    """Make `proc` current; its root logging is what configure_logger(server_args, prefix)
    set up in that process (basicConfig(force=True) -> a StreamHandler on its sys.stderr)."""
    proc.enter()
    configure_logger(SERVER_ARGS, prefix=prefix or "")
    for h in logging.getLogger("uvicorn").handlers:
        h.setStream(proc.stderr)
    for h in logging.getLogger("uvicorn.access").handlers:
        h.setStream(proc.stdout)


def access(client_port, method, path, status, record=True):
    scope = {"client": ("127.0.0.1", client_port), "method": method, "path": path, "query_string": b"",
             "root_path": "", "http_version": "1.1"}
    UV_ACCESS(self=types.SimpleNamespace(access_logger=logging.getLogger("uvicorn.access"), scope=scope),
              get_client_addr=uv_utils.get_client_addr,
              get_path_with_query_string=uv_utils.get_path_with_query_string, status=status)
    if record:
        truth_lines.append({"kind": "access", "method": method, "path": path, "status": status})


# ------------------------------------------------------------------ the scheduler stand-in
class Req:
    def __init__(self, rid):
        self.rid = rid
        self.priority = None
        self.routing_key = None


class Batch:
    def __init__(self, reqs):
        self.reqs = reqs
        self.forward_iter = None
        self.dp_cooperation_info = None

    def batch_size(self):
        return len(self.reqs)


class Sched:
    """The attributes of a Scheduler (0.5.23: of a SchedulerMetricsReporter and its .scheduler)
    that the stats functions read, with the real stats functions bound to it."""

    def __init__(self, dp_rank, spec: bool):
        self.dp_rank = dp_rank
        self.used = 0  # KV tokens in use (not counting evictable radix-cache tokens)
        self.evictable = 0
        self.max_total_num_tokens = MAX_TOTAL_TOKENS
        self.waiting_queue: list = []
        self.running_batch = Batch([])
        self.device = "cuda"
        self.disaggregation_mode = DisaggregationMode.NULL
        self.enable_metrics = False
        self.enable_kv_cache_events = False
        self.enable_priority_scheduling = False
        self.enable_mfu_metrics = False
        self.is_hybrid = self.is_hybrid_swa = self.is_hybrid_ssm = False
        self.is_stats_logging_rank = True  # attn_tp_rank == 0 (every rank with dp attention)
        self.current_scheduler_metrics_enabled = False  # metrics off (no --enable-metrics)
        self.spec_algorithm = SpeculativeAlgorithm.EAGLE if spec else SpeculativeAlgorithm.NONE
        self.server_args = SERVER_ARGS
        self.forward_ct = 0
        self.forward_ct_decode = 0
        self.num_generated_tokens = 0
        self.last_gen_throughput = 0.0
        self.last_input_throughput = 0.0
        self.last_prefill_tokens = 0
        self.step_time_dict = collections.defaultdict(list)
        self.num_retracted_reqs = self.num_paused_reqs = 0
        self.stats = types.SimpleNamespace()  # SchedulerStats: only written to (metrics are off)
        # spec counters, by the names each release uses
        self.spec_num_total_accepted_tokens = self.spec_num_total_forward_ct = 0  # 0.5.3
        self.cum_spec_accept_length = self.cum_spec_accept_count = 0
        self.spec_num_accepted_tokens = self.spec_num_forward_ct = 0  # 0.5.9/0.5.10
        self.spec_total_num_accepted_tokens = self.spec_total_num_forward_ct = 0
        self.spec_num_accept_tokens = self.spec_num_correct_drafts = 0  # 0.5.23
        self.spec_total_num_accept_tokens = 0
        self.spec_num_block_accept_tokens = self.spec_num_cap_tokens = 0
        self.decode_log_interval = SERVER_ARGS.decode_log_interval
        self._graph_backend_label = {"cpu": "cpu graph", "npu": "npu graph", "musa": "musa graph"}.get(
            self.device, "cuda graph")  # 0.5.23 _init_metrics
        self.draft_worker = None
        self.token_to_kv_pool_allocator = types.SimpleNamespace(
            available_size=lambda: self.max_total_num_tokens - self.used - self.evictable)
        self.tree_cache = types.SimpleNamespace(evictable_size=lambda: self.evictable)
        # the scheduler sets these when it starts (Scheduler.__init__ / init_metrics)
        self.last_decode_stats_tic = time_mod.perf_counter()
        self.last_prefill_stats_tic = time_mod.perf_counter()
        self.scheduler = self  # 0.5.23: reporter.scheduler
        if LAYOUT == "0.5.23":
            obs = types.SimpleNamespace(
                is_hybrid_swa=False, is_hybrid_ssm=False, enable_hisparse=False,
                max_total_num_tokens=self.max_total_num_tokens,
                token_to_kv_pool_allocator=self.token_to_kv_pool_allocator, tree_cache=self.tree_cache)
            obs._get_token_info = types.MethodType(get_token_info, obs)
            obs.get_pool_stats = types.MethodType(get_pool_stats, obs)
            self.pool_stats_observer = obs
            self.kv_events_publisher = types.SimpleNamespace(publish_kv_events=lambda: None,
                                                             emit_kv_metrics=lambda: None)
        else:
            self._get_token_info = types.MethodType(get_token_info, self)
            self._publish_kv_events = types.MethodType(publish_fn, self)
        self._prefill = types.MethodType(prefill_fn, self)
        self._decode = types.MethodType(decode_fn, self)
        self._spec = types.MethodType(spec_fn, self)

    # -- the scheduler loop around the stats calls
    def prefill(self, new_reqs: list, new_tokens: int, cached_tokens: int, pending_tokens: int = 0,
                duration: float = 0.05, cuda_graph: bool = False):
        """A prefill (extend) batch: the new requests leave the waiting queue; their KV is allocated."""
        for r in new_reqs:
            self.waiting_queue.remove(r)
        running_before = list(self.running_batch.reqs)
        self.used += new_tokens + cached_tokens
        self.evictable = max(0, self.evictable - cached_tokens)
        clock.advance(duration)
        if LAYOUT == "0.5.3":
            # scheduler.get_new_batch_prefill: log_prefill_stats(adder, can_run_list, running_bs, 0)
            adder = types.SimpleNamespace(log_input_tokens=new_tokens, log_hit_tokens=cached_tokens)
            self._prefill(adder, new_reqs, len(running_before), 0)
        else:
            kw = dict(log_input_tokens=new_tokens, log_hit_tokens=cached_tokens, new_token_ratio=0.7,
                      num_new_seqs=len(new_reqs))
            if LAYOUT == "0.5.9":
                kw["running_bs"] = len(running_before)
            else:
                kw["num_running_reqs"] = QueueCount.from_reqs(running_before)
            if LAYOUT == "0.5.23":
                kw["num_pending_tokens"] = pending_tokens
            ps = PrefillStats(**kw)
            if LAYOUT == "0.5.23":
                self._prefill(Batch(new_reqs), ps, cuda_graph)
            else:
                self._prefill(ps, cuda_graph)
        self.running_batch.reqs.extend(new_reqs)
        return {"new_seq": len(new_reqs), "new_token": new_tokens, "cached_token": cached_tokens,
                "running_req": len(running_before), "pending_token": pending_tokens}

    def decode_step(self, step_time: float, accepted=None):
        """One decode forward of the running batch. `accepted`: accepted draft tokens per request."""
        clock.advance(step_time)
        bs = len(self.running_batch.reqs)
        self.used += bs + (sum(accepted) if accepted else 0)
        if LAYOUT == "0.5.23":
            n = bs + (sum(accepted) if accepted else 0)  # result.get_num_generated_tokens(bs)
            self.num_generated_tokens += n
            if accepted is not None:
                self._spec(bs, sum(accepted), num_accept_tokens=n)
            self.forward_ct_decode = (self.forward_ct_decode + 1) % (1 << 30)
            self._decode(True, running_batch=self.running_batch, num_generated_tokens=n)
            return
        self.num_generated_tokens += bs  # process_batch_result_decode
        if accepted is not None:
            self._spec(bs, sum(accepted))  # (udpate|update)_spec_metrics(bs, num_accepted_tokens)
        self.forward_ct_decode = (self.forward_ct_decode + 1) % (1 << 30)
        if LAYOUT == "0.5.10":
            self._decode(True, running_batch=self.running_batch, num_accepted_tokens=sum(accepted or []))
        elif self.forward_ct_decode % SERVER_ARGS.decode_log_interval == 0:
            self._decode(True, running_batch=self.running_batch)

    def finish(self, n: int, keep_cached: int):
        """n requests finish: their KV is freed, `keep_cached` tokens stay in the radix cache."""
        done, self.running_batch.reqs = self.running_batch.reqs[:n], self.running_batch.reqs[n:]
        freed = min(self.used, sum(getattr(r, "kv", 0) for r in done) or self.used // max(1, n + len(self.running_batch.reqs)) * n)
        self.used -= freed
        self.evictable += min(keep_cached, freed)
        return done


# ------------------------------------------------------------------ truth bookkeeping
class Expect:
    """What each decode/prefill line must say, computed from the values passed."""

    def __init__(self, s: Sched, prefix: str):
        self.s = s
        self.prefix = prefix
        self.last_decode = clock.mono()
        self.last_prefill = clock.mono()
        self.gen = 0
        self.prev_prefill_tokens = 0
        self.spec_acc = 0  # accepted draft tokens since the last decode line
        self.spec_ct = 0  # request-steps since the last decode line

    def dp_tp(self):
        m = re.findall(r"(DP|TP)(\d+)", self.prefix)
        d = dict(m)
        return (int(d["DP"]) if "DP" in d else None), (int(d["TP"]) if "TP" in d else None)

    def base(self, kind):
        t = clock.t
        dp, tp = self.dp_tp()
        return {"kind": kind, "time_epoch": round(t, 3), "time_iso": common.iso(t),
                "time_printed": time_mod.strftime("%Y-%m-%d %H:%M:%S", time_mod.gmtime(t)),
                "prefix": self.prefix, "dp_rank": dp, "tp_rank": tp}

    def prefill(self, info: dict, cuda_graph=False):
        now = clock.mono()
        gap = now - self.last_prefill
        self.last_prefill = now
        s = self.s
        num_used = s.used
        row = self.base("prefill")
        row.update(new_seq=info["new_seq"], new_token=info["new_token"], cached_token=info["cached_token"],
                   token_usage=num_used / s.max_total_num_tokens, num_used_tokens=num_used,
                   running_req=info["running_req"], queue_req=len(s.waiting_queue), cuda_graph=cuda_graph)
        if LAYOUT in ("0.5.9", "0.5.10"):
            # input throughput = the PREVIOUS prefill batch's new tokens / time since the previous prefill line
            row["input_throughput"] = self.prev_prefill_tokens / gap
            row["input_throughput_counts_previous_batch"] = True
        elif LAYOUT == "0.5.23":
            row["input_throughput"] = info["new_token"] / gap
            row["pending_token"] = info["pending_token"]
        self.prev_prefill_tokens = info["new_token"]
        row["interval_s"] = round(gap, 6)
        truth_lines.append(row)

    def decode_step(self, bs, accepted):
        # every release: len(batch.reqs) per decode step plus the accepted draft tokens
        self.gen += bs + (sum(accepted) if accepted else 0)
        if accepted:
            self.spec_acc += sum(accepted)
            self.spec_ct += bs

    def decode_line(self):
        now = clock.mono()
        gap = now - self.last_decode
        self.last_decode = now
        s = self.s
        row = self.base("decode")
        row.update(running_req=len(s.running_batch.reqs), num_token=s.used,
                   token_usage=s.used / s.max_total_num_tokens, cuda_graph=True,
                   gen_throughput=self.gen / gap, generated_tokens=self.gen, interval_s=round(gap, 6),
                   queue_req=len(s.waiting_queue))
        if self.spec_ct:
            draft_tokens = SERVER_ARGS.speculative_num_draft_tokens
            if LAYOUT == "0.5.23":
                # accept len = (accepted drafts + 1 per request-step) / request-steps;
                # accept rate = accepted drafts / (request-steps * (num_draft_tokens - 1))
                row["accept_len"] = (self.spec_acc + self.spec_ct) / self.spec_ct
                row["accept_rate"] = self.spec_acc / (self.spec_ct * (draft_tokens - 1))
            else:
                row["accept_len"] = (self.spec_acc + self.spec_ct) / self.spec_ct
                if LAYOUT != "0.5.3":
                    # accept rate = (accepted drafts + 1 per request-step) / (request-steps * num_draft_tokens)
                    row["accept_rate"] = (self.spec_acc + self.spec_ct) / (self.spec_ct * draft_tokens)
            row["spec_request_steps"] = self.spec_ct
            row["spec_accepted_draft_tokens"] = self.spec_acc
        self.gen = 0
        self.spec_acc = self.spec_ct = 0
        truth_lines.append(row)


# ------------------------------------------------------------------ start-up
def maybe(call, **ns):
    """Issue a start-up line if this release has it (wording and presence vary by release)."""
    if call is None:
        return
    call(**ns)


def scheduler_startup(proc: Proc, prefix: str, gpu: int, quiet_tqdm: bool):
    enter(proc, prefix)
    me = types.SimpleNamespace(device="cuda", gpu_id=gpu, model=LlamaForCausalLM(), dtype="torch.bfloat16",
                               weight_load_mem_usage=15.09, weight_load_time=4.87,
                               max_total_num_tokens=MAX_TOTAL_TOKENS, max_prefill_tokens=16384,
                               max_running_requests=4096, model_config=types.SimpleNamespace(context_len=131072),
                               server_args=SERVER_ARGS, startup_available_gpu_memory_gb=6.86)
    gpu_mem = lambda *a, **k: 78.52  # noqa: E731
    maybe(TORCH_DIST, self=me)
    clock.advance(0.9)
    maybe(LOAD_BEGIN, self=me, get_available_gpu_memory=gpu_mem)
    if not quiet_tqdm:
        # SGLang's safetensors loader: tqdm(..., bar_format=_BAR_FORMAT) on stderr (rank 0 only)
        for _ in tqdm_mod.tqdm(range(4), desc="Loading safetensors checkpoint shards", bar_format=bar_format(),
                               position=tqdm_mod.tqdm._get_free_pos()):
            clock.advance(1.2)
    else:
        clock.advance(4.8)
    maybe(LOAD_END, self=me, after_avail_memory=63.43, tic_total=time_mod.perf_counter() - 4.87, quant_str="",
             time=time_mod)
    # K (= V) size: tokens x 32 layers x 8 KV heads x 128 x 2 bytes; pd (--max-total-tokens 40960)
    # leaves more memory free
    kv_gb, pool_end_mem, avail_mem = (27.78, 7.42, 6.86) if SCENARIO != "pd" else (2.5, 32.7, 32.14)
    maybe(KV_ALLOC, num_tokens=MAX_TOTAL_TOKENS, k_size_GB=kv_gb, v_size_GB=kv_gb)
    maybe(POOL_END, self=me, get_available_gpu_memory=lambda *a, **k: pool_end_mem)
    clock.advance(6.2)
    if MAX_TOTAL is not None:
        MAX_TOTAL(self=me, server_args=SERVER_ARGS, avail_mem=avail_mem,
                  get_schedule=lambda: types.SimpleNamespace(chunked_prefill_size=8192))


def http_startup(main=None, port=30000):
    main = main or MAIN
    enter(main, None)
    if TEMPLATE is not None:
        TEMPLATE(self=types.SimpleNamespace(_jinja_template_content_format="string"))
    # set_uvicorn_logging_configs(server_args) edits uvicorn.config.LOGGING_CONFIG; uvicorn.run /
    # uvicorn.Config(app, host, port, log_level=...) then applies it in this process
    try:
        set_uvicorn_logging_configs(SERVER_ARGS)
    except TypeError:
        set_uvicorn_logging_configs()
    uvicorn.config.Config(object(), host="0.0.0.0", port=port, log_level="info")
    enter(main, None)
    UV_STARTED(process_id=os.getpid())
    UV_WAITING(self=types.SimpleNamespace(logger=logging.getLogger("uvicorn.error")))
    UV_COMPLETE(self=types.SimpleNamespace(logger=logging.getLogger("uvicorn.error")))
    UV_RUNNING(addr_format="%s://%s:%d", config=types.SimpleNamespace(ssl=None), protocol_name="http",
               host="0.0.0.0", port=port, style=lambda s, **k: s)


# ------------------------------------------------------------------ scenario
def run():
    dp2 = SCENARIO == "dp2"
    spec = SCENARIO == "spec"
    ranks = [0, 1] if dp2 else [0]
    prefixes = [scheduler_prefix(r if dp2 else None, r if dp2 else 0) for r in ranks]
    if dp2:
        # DataParallelController process (configure_logger(server_args), no prefix)
        enter(MAIN, None)
        if DP_LAUNCH is not None:
            for r in ranks:
                DP_LAUNCH(dp_rank=r, base_gpu_id=r)
    for r, pfx in zip(ranks, prefixes):
        scheduler_startup(SCHED[r], pfx, gpu=r, quiet_tqdm=(r != 0))
    scheds = {r: Sched(r, spec) for r in ranks}
    exp = {r: Expect(scheds[r], prefixes[r]) for r in ranks}
    http_startup()

    port = [50210]

    def http(method, path, status=200, record=True):
        enter(MAIN, None)
        port[0] += 3
        access(port[0], method, path, status, record)

    def on(r):
        enter(SCHED[r], prefixes[r])
        return scheds[r], exp[r]

    def do_prefill(r, n, new_tok, cached, pending=0, dur=0.06):
        s, e = on(r)
        reqs = [Req(f"r{r}-{i}-{clock.t}") for i in range(n)]
        s.waiting_queue.extend(reqs)
        info = s.prefill(reqs, new_tok, cached, pending, dur)
        e.prefill(info)

    def do_decode(r, steps, step_time, accept_pattern=None):
        s, e = on(r)
        for i in range(steps):
            bs = len(s.running_batch.reqs)
            acc = None
            if spec:
                acc = [accept_pattern[(i + j) % len(accept_pattern)] for j in range(bs)]
            e.decode_step(bs, acc)
            s.decode_step(step_time, acc)
            if s.forward_ct_decode % SERVER_ARGS.decode_log_interval == 0:
                e.decode_line()

    # warm-up: GET model info, one /generate (a prefill line), then "fired up"
    http("GET", MODEL_INFO_PATH)
    clock.advance(0.3)
    for r in ranks:
        do_prefill(r, 1, 6, 0, dur=0.2)
        s, _ = on(r)
        s.finish(1, keep_cached=0)
        s.used = 0
        s.evictable = 6
    http("POST", "/generate")
    enter(MAIN, None)
    FIRED_UP()
    truth_lines.append({"kind": "ready"})

    # traffic
    pat = [3, 2, 3, 1, 0, 3, 2]
    clock.advance(12.0)
    for r in ranks:
        do_prefill(r, 4, 2210 + 117 * r, 0)
    for r in ranks:
        do_decode(r, 40, 0.021 + 0.002 * r, pat)
    for r in ranks:
        do_prefill(r, 16, 8192, 0, pending=5120, dur=0.4)  # a chunk of a long prompt batch, more pending
        s, _ = on(r)
        s.waiting_queue.extend(Req(f"q{r}-{i}") for i in range(7 + r))
    for r in ranks:
        do_prefill(r, 3, 5120, 1536, dur=0.25)
    for r in ranks:
        do_decode(r, 80, 0.034, pat)
    for r in ranks:
        s, _ = on(r)
        waiting = list(s.waiting_queue)
        s.waiting_queue.clear()
        s.waiting_queue.extend(waiting[:2])
        reqs = waiting[2:]
        s.waiting_queue.extend(reqs)
        info = s.prefill(reqs, 3072, 4096, 0, 0.18)
        exp[r].prefill(info)
    for r in ranks:
        # the KV pool ran full: two requests go back to the waiting queue
        s, e = on(r)
        back = s.running_batch.reqs[-2:]
        s.running_batch.reqs = s.running_batch.reqs[:-2]
        s.waiting_queue.extend(back)
        s.used -= 1700
        retract_line(2, 1700, 0.7, 0.85)
        truth_lines.append({"kind": "retract", "prefix": prefixes[r], "retracted_reqs": 2})
        do_decode(r, 40, 0.041, [3, 3, 2])
    for _ in range(5):
        http("POST", "/v1/chat/completions")
    for r in ranks:
        s, _ = on(r)
        s.finish(len(s.running_batch.reqs) - 2, keep_cached=9000)
    for r in ranks:
        do_decode(r, 40, 0.012, [1, 0, 2])
    http("POST", "/v1/chat/completions", 400)
    for _ in range(2):
        http("POST", "/v1/chat/completions")
    http("GET", "/health")


# ------------------------------------------------------------------ scenario "pd": PD disaggregation
# Two servers, `--disaggregation-mode prefill` (port 30000) and `--disaggregation-mode decode`
# (port 30001), both with --enable-request-time-stats-logging, behind SGLang's mini load balancer
# (sglang_router.mini_lb: it posts the same JSON to both, adding bootstrap_host/port and a random
# bootstrap_room; no rid, so each server's tokenizer gives the request its own uuid4().hex rid).
# What runs is SGLang's: the stats functions with disaggregation_mode set (PD branches), the
# per-request timing classes (0.5.3/0.5.9: TimeStats in srt/metrics/collector.py; 0.5.10+:
# ReqTimeStatsBase/SchedulerReqTimeStats, calibrate_time_diff, convert_time_to_realtime*,
# RequestStage*, set_time_batch in srt/observability/req_time_stats.py), Req.log_time_stats
# (srt/managers/schedule_batch.py), the condition that calls it (stream_output_generation's `if`,
# 0.5.23: SchedulerOutputStreamer._maybe_log_time_stats), the KV-transfer metric code (0.5.10:
# compute_and_observe_kv_transfer_metrics with kv_to_page_num; 0.5.23: the same with
# KVTransferMetric) and DecodePreallocQueue.num_tokens_pre_allocated. The two scheduler loops
# (event_loop_normal_disagg_prefill / event_loop_normal_disagg_decode) are modelled here.
def pd_main():  # noqa: C901  (one scenario, written out in order)
    import builtins
    import heapq
    import random

    rng = random.Random(20251104)
    fake_host = common.module_constant(P("srt/disaggregation/utils.py"), "FAKE_BOOTSTRAP_HOST")
    kv_bytes_per_token = 32 * 2 * 8 * 128 * 2  # Llama-3.1-8B bf16, page_size 1: sum(kv_item_lens)
    old_ts = LAYOUT in ("0.5.3", "0.5.9")
    PREFILL, DECODE = DisaggregationMode.PREFILL, DisaggregationMode.DECODE

    # ---- SGLang's per-request timing code
    if old_ts:
        ts_rel = "srt/metrics/collector.py"
        TimeStats = extract(ts_rel, "TimeStats", DisaggregationMode=DisaggregationMode,
                            **module_values(ts_rel, ["SGLANG_TEST_REQUEST_TIME_STATS"]))
        set_time_batch = None
    else:
        ts_rel = "srt/observability/req_time_stats.py"
        g = dict(DisaggregationMode=DisaggregationMode,
                 TraceNullContext=extract("srt/observability/trace.py", "TraceNullContext"))
        g.update(module_values(ts_rel, ["SGLANG_TEST_REQUEST_TIME_STATS", "global_diff_realtime_monotonic"], **g))
        for name in ("calibrate_time_diff", "convert_time_to_realtime", "convert_time_to_realtime_ns",
                     "RequestStageConfig", "RequestStage", "ReqTimeStatsBase", "SchedulerReqTimeStats",
                     "set_time_batch"):
            g[name] = extract(ts_rel, name, **g)
        TimeStats, set_time_batch = g["SchedulerReqTimeStats"], g["set_time_batch"]
    log_time_stats = extract("srt/managers/schedule_batch.py", "Req.log_time_stats")
    if LAYOUT == "0.5.23":
        gate_fn = extract("srt/managers/scheduler_components/output_streamer.py",
                          "SchedulerOutputStreamer._maybe_log_time_stats",
                          get_parallel=lambda: types.SimpleNamespace(attn_tp_rank=0),
                          get_observability=lambda: SERVER_ARGS)

        def gate(req):
            gate_fn(None, req=req)
    else:
        # stream_output_generation: `if req.finished() and self.tp_rank == 0 (0.5.10: attn_tp_rank)
        # and self.server_args.enable_request_time_stats_logging: req.log_time_stats()`
        rel = "srt/managers/scheduler_output_processor_mixin.py"
        tree, _ = common._tree(P(rel))
        cond = next(n for n in ast.walk(tree) if isinstance(n, ast.If)
                    and any("log_time_stats" in ast.unparse(b) for b in n.body))
        cond_code = compile(ast.Expression(body=cond.test), P(rel), "eval")
        gate_self = types.SimpleNamespace(tp_rank=0, attn_tp_rank=0, server_args=SERVER_ARGS)

        def gate(req):
            if eval(cond_code, {"__builtins__": builtins}, {"req": req, "self": gate_self}):
                req.log_time_stats()
    kv_metric_cls = None
    if LAYOUT == "0.5.10":
        extract("srt/disaggregation/utils.py", "kv_to_page_num")  # imported inside compute_and_observe_...
    elif LAYOUT == "0.5.23":
        kv_metric_cls = extract("srt/disaggregation/base/conn.py", "KVTransferMetric")
    pre_allocated = extract("srt/disaggregation/decode.py", "DecodePreallocQueue.num_tokens_pre_allocated")
    update_decode_queue_stats = None
    if LAYOUT == "0.5.23":
        update_decode_queue_stats = extract(STATS_FILE, f"{STATS_CLASS}._update_decode_queue_stats", **STATS_G)

    def new_time_stats(mode):
        if old_ts:
            return TimeStats(disagg_mode=mode)  # Req.__init__
        ts = TimeStats(disagg_mode=mode)  # Req.__init__ (schedule_batch.py), time_stats is None
        ts.set_metrics_collector(None)
        ts.set_scheduler_recv_time()
        return ts

    OLD_FIELDS = {"prefill_bootstrap_queue_entry": "prefill_bootstrap_queue_entry_time",
                  "wait_queue_entry": "wait_queue_entry_time", "forward_entry": "forward_entry_time",
                  "prefill_transfer_queue_entry": "prefill_transfer_queue_entry_time",
                  "completion": "completion_time", "decode_prealloc_queue_entry": "decode_prealloc_queue_entry_time",
                  "decode_transfer_queue_entry": "decode_transfer_queue_entry_time"}

    def stamp(reqs, what):
        """The time_stats update SGLang makes at that point (0.5.3/0.5.9: `req.time_stats.X_time =
        time.perf_counter()`; 0.5.10+: `req.time_stats.set_X_time()`, forward entry through
        set_time_batch(can_run_list, "set_forward_entry_time"))."""
        if old_ts:
            if what == "prefill_finished" and LAYOUT == "0.5.9":
                for r in reqs:
                    if r.time_stats.prefill_finished_ts == 0.0:
                        r.time_stats.prefill_finished_ts = time_mod.time()
            if what not in OLD_FIELDS:
                return  # no such field in this release
            for r in reqs:
                if what == "forward_entry" and r.time_stats.forward_entry_time != 0:
                    continue
                setattr(r.time_stats, OLD_FIELDS[what], time_mod.perf_counter())
            return
        if what == "forward_entry":
            set_time_batch(reqs, "set_forward_entry_time")
            return
        for r in reqs:
            getattr(r.time_stats, f"set_{what}_time")()

    class PDReq(Req):
        """The scheduler's Req on one server (the attributes log_time_stats and the stats read)."""

        def __init__(self, pair, rid, mode, max_new):
            super().__init__(rid)
            self.pair = pair
            self.bootstrap_room = pair.room
            self.bootstrap_host = pair.host
            self.origin_input_ids = list(range(pair.prompt))  # only len() is read
            self.fill_ids = self.origin_input_ids  # num_tokens_pre_allocated (0.5.3-0.5.10)
            self.extend_end = pair.prompt  # num_tokens_pre_allocated (0.5.23)
            self.output_ids = []
            self.cached_tokens = 0
            self.prefill_attempt_count = 0
            self.pending_bootstrap = False
            self.has_log_time_stats = False
            self.finished_reason = None
            self.max_new_tokens = max_new
            self.kv = 0
            self.time_stats = new_time_stats(mode)
            self.log_time_stats = types.MethodType(log_time_stats, self)

        def finished(self):
            return self.finished_reason is not None

    class Pair:
        """One request as the router sends it to both servers (warm-up requests: one server only)."""

        def __init__(self, name, arrive, prompt, max_new, cached=0, transfer_s=0.0, bootstrap_s=0.004,
                     on_p=True, on_d=True, fake=False):
            self.name, self.arrive, self.prompt, self.max_new = name, arrive, prompt, max_new
            self.cached, self.transfer_s, self.bootstrap_s, self.fake = cached, transfer_s, bootstrap_s, fake
            self.room = 0 if fake else rng.randint(0, 2 ** 63 - 1)  # mini_lb _generate_bootstrap_room
            self.host = fake_host if fake else "10.0.0.11"
            self.p = PDReq(self, f"{rng.getrandbits(128):032x}", PREFILL, 1) if on_p else None
            self.d = PDReq(self, f"{rng.getrandbits(128):032x}", DECODE, max_new) if on_d else None
            self.d_handshake_at = None  # set when the decode scheduler creates the KV receiver
            self.p_kv_ready_at = arrive if fake else None  # fake sender: WaitingForInput at once
            self.transfer_start = self.transfer_done_at = None
            self.p_done = self.d_done = False

    class Engine:
        def __init__(self):
            self.servers = []
            self.misc = []
            self.seq = 0

        def at(self, t, fn):
            self.seq += 1
            heapq.heappush(self.misc, (t, self.seq, fn))

        def run(self):
            while True:
                t_s, srv = min(((s.next_wake(), i) for i, s in enumerate(self.servers)), default=(float("inf"), -1))
                t_m = self.misc[0][0] if self.misc else float("inf")
                if t_s == float("inf") and t_m == float("inf"):
                    return
                if t_m <= t_s:
                    _, _, fn = heapq.heappop(self.misc)
                    clock.set(max(clock.t, t_m))
                    fn()
                else:
                    clock.set(max(clock.t, t_s))
                    self.servers[srv].wake(clock.t)

    engine = Engine()

    class Server:
        def __init__(self, role, sink_, pid_main, pid_sched, port, mode):
            self.role, self.port, self.mode = role, port, mode
            self.sink = sink_
            self.main = Proc(sink_, "MainProcess", pid_main)
            self.proc = Proc(sink_, "scheduler0", pid_sched)
            self.lines: list[dict] = []
            self.arrivals: list[Pair] = []
            self.batch = None
            self.busy_until = None
            self.client_port = {"127.0.0.1": 40110 + port % 100, "10.0.0.5": 51200 + port % 100}

        def start(self):
            scheduler_startup(self.proc, "", gpu=0, quiet_tqdm=False)
            s = Sched(None, False)
            s.disaggregation_mode = self.mode
            self.s = s
            self.e = Expect(s, "")
            self.setup(s)
            http_startup(self.main, self.port)

        def access(self, method, path, client="10.0.0.5", status=200):
            enter(self.main, None)
            self.client_port[client] += 7
            scope = {"client": (client, self.client_port[client]), "method": method, "path": path,
                     "query_string": b"", "root_path": "", "http_version": "1.1"}
            UV_ACCESS(self=types.SimpleNamespace(access_logger=logging.getLogger("uvicorn.access"), scope=scope),
                      get_client_addr=uv_utils.get_client_addr,
                      get_path_with_query_string=uv_utils.get_path_with_query_string, status=status)
            self.lines.append({"kind": "access", "method": method, "path": path, "status": status,
                               "client": client, "time_epoch": round(clock.t, 6)})

        def row(self, extra: dict):
            """The row Expect computed for the stats line just logged, plus the PD fields."""
            r = truth_lines.pop()
            r.pop("prefix"), r.pop("dp_rank"), r.pop("tp_rank")
            r.update(extra)
            self.lines.append(r)

        def stream(self, reqs, path):
            """stream_output: the per-request timing line of each finished request, then (a little
            later, through detokenizer and tokenizer manager) the HTTP response's access line."""
            for r in reqs:
                if r.finished() and not r.has_log_time_stats:
                    gate(r)
                    if r.has_log_time_stats:
                        self.lines.append({"kind": "req_time_stats", "role": self.role, "request": r.pair.name,
                                           "rid": r.rid, "bootstrap_room": r.bootstrap_room,
                                           "time_epoch": round(clock.t, 6), "time_iso": common.iso(clock.t),
                                           "time_printed": time_mod.strftime("%Y-%m-%d %H:%M:%S", time_mod.gmtime(clock.t)),
                                           "_req": r})
                    client = "127.0.0.1" if r.pair.fake else "10.0.0.5"
                    engine.at(clock.t + 0.0015, lambda c=client, p=path: self.access("POST", p, c))

    class PrefillServer(Server):
        def setup(self, s):
            s.disagg_prefill_bootstrap_queue = types.SimpleNamespace(queue=[])
            s.disagg_prefill_inflight_queue = []

        def next_wake(self):
            if self.batch is not None:
                return self.busy_until
            s = self.s
            c = [p.arrive for p in self.arrivals]
            c += [r.pair.p_kv_ready_at for r in s.disagg_prefill_bootstrap_queue.queue if r.pair.p_kv_ready_at is not None]
            c += [r.pair.transfer_done_at for r in s.disagg_prefill_inflight_queue]
            return min(c, default=float("inf"))

        def wake(self, now):
            enter(self.proc, "")
            if self.batch is not None:
                self.finish_batch()
                self.poll_inflight()
            s = self.s
            # process_input_requests -> _add_request_to_queue: bootstrap queue (0.5.23 create_sender:
            # pending_bootstrap until finalize_bootstrap)
            for pair in [p for p in self.arrivals if p.arrive <= now]:
                self.arrivals.remove(pair)
                r = pair.p
                s.disagg_prefill_bootstrap_queue.queue.append(r)
                r.pending_bootstrap = LAYOUT == "0.5.23"
                stamp([r], "prefill_bootstrap_queue_entry")
            # pop_bootstrapped: the sender polls WaitingForInput once decode has sent its KV indices
            q = s.disagg_prefill_bootstrap_queue.queue
            for r in [r for r in q if r.pair.p_kv_ready_at is not None and r.pair.p_kv_ready_at <= now]:
                q.remove(r)
                stamp([r], "bootstrap_done")
                r.pending_bootstrap = False
                stamp([r], "wait_queue_entry")
                s.waiting_queue.append(r)
            if s.waiting_queue:
                self.start_batch()
            else:
                self.poll_inflight()

        def start_batch(self):
            """get_new_batch_prefill: everything waiting fits one batch here."""
            s = self.s
            can_run = list(s.waiting_queue)
            s.waiting_queue.clear()
            new_tok = sum(r.pair.prompt - r.pair.cached for r in can_run)
            hit_tok = sum(r.pair.cached for r in can_run)
            s.used += hit_tok  # match_prefix locks the cached prefix (no longer evictable)
            s.evictable -= hit_tok
            info = {"new_seq": len(can_run), "new_token": new_tok, "cached_token": hit_tok, "running_req": 0,
                    "pending_token": sum(r.pair.prompt for r in s.waiting_queue)}
            if LAYOUT == "0.5.3":  # logged here, before prepare_for_extend allocates the new tokens
                adder = types.SimpleNamespace(log_input_tokens=new_tok, log_hit_tokens=hit_tok)
                s._prefill(adder, can_run, len(s.running_batch.reqs), 0)
                self.e.prefill(info)
                self.row({"prealloc_req": len(s.disagg_prefill_bootstrap_queue.queue),
                          "inflight_req": len(s.disagg_prefill_inflight_queue)})
            stamp(can_run, "forward_entry")
            for r in can_run:
                r.cached_tokens = r.pair.cached
                r.kv = r.pair.prompt
            s.used += new_tok  # prepare_for_extend
            ps = None
            if PrefillStats is not None:
                kw = dict(log_input_tokens=new_tok, log_hit_tokens=hit_tok, new_token_ratio=0.7,
                          num_new_seqs=len(can_run))
                if LAYOUT == "0.5.9":
                    kw["running_bs"] = 0
                else:
                    kw["num_running_reqs"] = QueueCount.from_reqs([])
                if LAYOUT == "0.5.23":
                    kw["num_pending_tokens"] = info["pending_token"]
                ps = PrefillStats(**kw)
            self.batch = (Batch(can_run), ps, info)
            warm = any(r.pair.fake for r in can_run)
            self.busy_until = clock.t + (0.35 if warm else 0.012 + new_tok * 2.2e-5)

        def finish_batch(self):
            """process_batch_result_disagg_prefill."""
            s = self.s
            batch, ps, info = self.batch
            self.batch = self.busy_until = None
            for r in batch.reqs:
                stamp([r], "prefill_finished")
                r.output_ids.append(128000 + len(r.output_ids))
                s.disagg_prefill_inflight_queue.append(r)
                # send_kv_chunk(req, last_chunk=True): the KV transfer starts
                pair = r.pair
                pair.transfer_start = clock.t
                pair.transfer_done_at = clock.t + pair.transfer_s
                stamp([r], "prefill_transfer_queue_entry")
            if LAYOUT in ("0.5.10", "0.5.23"):
                if LAYOUT == "0.5.23":
                    s._prefill(batch, ps, False)
                else:
                    s._prefill(ps, False)
                self.e.prefill(info)
                extra = {"inflight_req": len(s.disagg_prefill_inflight_queue)}
                if LAYOUT == "0.5.23":
                    extra.update(bootstrap_req=len(s.disagg_prefill_bootstrap_queue.queue),
                                 optimistic_req=sum(1 for r in batch.reqs if r.pending_bootstrap))
                else:
                    extra["prealloc_req"] = len(s.disagg_prefill_bootstrap_queue.queue)
                self.row(extra)

        def poll_inflight(self):
            """process_disagg_prefill_inflight_queue."""
            s = self.s
            now = clock.t
            done = [r for r in s.disagg_prefill_inflight_queue if r.pair.transfer_done_at <= now]
            if not done:
                return
            s.disagg_prefill_inflight_queue = [r for r in s.disagg_prefill_inflight_queue if r not in done]
            for r in done:
                r.finished_reason = "length"  # FINISH_LENGTH(length=0)
                s.used -= r.kv  # release_kv_cache: the prompt goes to the radix cache
                s.evictable += r.kv
                stamp([r], "prefill_kv_transfer_finish")
            stamp(done, "completion")
            for r in done:
                r.pair.p_done = True
                if LAYOUT == "0.5.10":
                    r.time_stats.compute_and_observe_kv_transfer_metrics(
                        num_tokens=len(r.origin_input_ids), page_size=1,
                        bytes_per_page_all_layers=kv_bytes_per_token)
                elif LAYOUT == "0.5.23" and r.bootstrap_host != fake_host:
                    # mooncake: no transfer_latency_s of its own (completion - transfer-queue entry is used)
                    r.time_stats.compute_and_observe_kv_transfer_metrics(
                        kv_metric_cls(transfer_total_bytes=len(r.origin_input_ids) * kv_bytes_per_token))
            self.stream(done, "/generate" if done[0].pair.fake else "/v1/chat/completions")

    class PreallocQueue:
        num_tokens_pre_allocated = property(pre_allocated)  # DecodePreallocQueue's, as written

        def __init__(self, transfer_queue):
            self.queue, self.retracted_queue, self.transfer_queue = [], [], transfer_queue

        def pre_allocated_token_counts(self):  # 0.5.23, read for metrics only
            return self.num_tokens_pre_allocated, 0

    class TransferQueue:
        def __init__(self):
            self.queue = []  # DecodeRequest(req, ...)

        def num_pending_deferred_releases(self):
            return 0

    class DecodeServer(Server):
        def setup(self, s):
            s.disagg_decode_transfer_queue = TransferQueue()
            s.disagg_decode_prealloc_queue = PreallocQueue(s.disagg_decode_transfer_queue)
            if update_decode_queue_stats is not None:
                s._update_decode_queue_stats = types.MethodType(update_decode_queue_stats, s)
            self.last_prebuilt = None
            self.again = False

        def next_wake(self):
            if self.batch is not None:
                return self.busy_until
            if self.again:
                return clock.t
            s = self.s
            c = [p.arrive for p in self.arrivals]
            c += [dr.req.pair.d_handshake_at for dr in s.disagg_decode_prealloc_queue.queue]
            c += [dr.req.pair.transfer_done_at for dr in s.disagg_decode_transfer_queue.queue
                  if dr.req.pair.transfer_done_at is not None]
            if s.running_batch.reqs:
                c.append(clock.t)
            return min(c, default=float("inf"))

        def wake(self, now):
            enter(self.proc, "")
            if self.batch is not None:
                self.finish_step()
            self.again = False
            s = self.s
            for pair in [p for p in self.arrivals if p.arrive <= now]:  # _add_request_to_queue
                self.arrivals.remove(pair)
                s.disagg_decode_prealloc_queue.queue.append(types.SimpleNamespace(req=pair.d, host_staged=False))
                stamp([pair.d], "decode_prealloc_queue_entry")
                # DecodePreallocQueue.add creates the KV receiver: the handshake with the prefill
                # server's bootstrap server starts now (fake receiver: no handshake)
                pair.d_handshake_at = now + (0.0 if pair.fake else pair.bootstrap_s)
            # process_decode_queue: pop_preallocated (receiver polls WaitingForInput once the
            # handshake with the prefill server's bootstrap server is done; KV allocated; the KV
            # indices go to the prefill server), then pop_transferred
            pq, tq = s.disagg_decode_prealloc_queue.queue, s.disagg_decode_transfer_queue.queue
            for dr in [dr for dr in pq if dr.req.pair.d_handshake_at <= now]:
                r = dr.req
                stamp([r], "bootstrap_done")
                pq.remove(dr)
                r.kv = r.pair.prompt
                s.used += r.kv
                tq.append(dr)
                stamp([r], "decode_transfer_queue_entry")
                if r.pair.fake:
                    r.pair.transfer_done_at = now  # fake receiver: Success once initialised
                else:
                    r.pair.p_kv_ready_at = now + 0.0008
            for dr in [dr for dr in tq if dr.req.pair.transfer_done_at is not None
                       and dr.req.pair.transfer_done_at <= now]:
                r = dr.req
                tq.remove(dr)
                r.output_ids.append(128000)  # the prefill server's first token
                r.cached_tokens = r.pair.cached  # from the metadata buffer (0.5.23 prints it)
                stamp([r], "wait_queue_entry")
                s.waiting_queue.append(r)
            # get_next_disagg_decode_batch_to_run
            if self.last_prebuilt is not None:
                s.running_batch.reqs.extend(self.last_prebuilt)
                self.last_prebuilt = None
            if s.waiting_queue:  # get_new_prebuilt_batch: a fake "prefill" of what arrived
                can_run = list(s.waiting_queue)
                s.waiting_queue.clear()
                stamp(can_run, "forward_entry")
                stamp(can_run, "decode_prebuilt_finish")  # process_batch_result_prebuilt
                self.last_prebuilt = can_run
                self.again = True
                return
            s.running_batch.reqs = [r for r in s.running_batch.reqs if not r.finished()]  # update_running_batch
            if s.running_batch.reqs:
                bs = len(s.running_batch.reqs)
                self.batch = Batch(list(s.running_batch.reqs))
                self.busy_until = now + 0.0072 + 0.00025 * bs + 2e-8 * sum(r.kv for r in self.batch.reqs)

        def finish_step(self):
            """process_batch_result_decode."""
            s = self.s
            batch = self.batch
            self.batch = self.busy_until = None
            s.running_batch = batch
            bs = len(batch.reqs)
            for r in batch.reqs:
                r.output_ids.append(128000 + len(r.output_ids))
                r.kv += 1
                s.used += 1
                stamp([r], "last_decode_finish")
                if len(r.output_ids) >= r.max_new_tokens:
                    r.finished_reason = "length"
                    s.used -= r.kv
                    stamp([r], "completion")
                    r.pair.d_done = True
            self.stream([r for r in batch.reqs if r.finished()],
                        "/generate" if batch.reqs[0].pair.fake else "/v1/chat/completions")
            self.e.decode_step(bs, None)
            if LAYOUT == "0.5.23":
                s.num_generated_tokens += bs
                s.forward_ct_decode = (s.forward_ct_decode + 1) % (1 << 30)
                s._decode(True, running_batch=batch, num_generated_tokens=bs)
            else:
                s.num_generated_tokens += bs
                s.forward_ct_decode = (s.forward_ct_decode + 1) % (1 << 30)
                if LAYOUT == "0.5.10":
                    s._decode(True, running_batch=batch, num_accepted_tokens=0)
                elif s.forward_ct_decode % SERVER_ARGS.decode_log_interval == 0:
                    s._decode(True, running_batch=batch)
            if s.forward_ct_decode % SERVER_ARGS.decode_log_interval == 0:
                self.e.decode_line()
                pq = s.disagg_decode_prealloc_queue
                self.row({"pre_allocated_tokens": sum(dr.req.pair.prompt for dr in pq.transfer_queue.queue),
                          "pre_allocated_usage": sum(dr.req.pair.prompt for dr in pq.transfer_queue.queue)
                          / s.max_total_num_tokens,
                          "prealloc_req": len(pq.queue), "transfer_req": len(pq.transfer_queue.queue),
                          "retracted_req": len(pq.retracted_queue), "forward_ct_decode": s.forward_ct_decode})

    sink_d = Sink()
    PS = PrefillServer("prefill", sink, 3101, 3178, 30000, PREFILL)
    DS = DecodeServer("decode", sink_d, 4101, 4178, 30001, DECODE)

    # ---- start-up and the PD warm-up of each server (http_server.py _execute_server_warmup: GET
    # model info, then POST /generate with bootstrap_host FAKE_BOOTSTRAP_HOST, bootstrap_room 0,
    # input_ids of 4 tokens, max_new_tokens 8: fake KV transfer, the request runs on this server alone)
    for srv in (PS, DS):
        srv.start()
        engine.servers = [srv]
        srv.access("GET", MODEL_INFO_PATH, "127.0.0.1")
        clock.advance(0.3)
        warm = Pair("warmup", clock.t + 0.002, 4, 8, fake=True, on_p=srv is PS, on_d=srv is DS)
        srv.arrivals.append(warm)
        engine.run()
        enter(srv.main, None)
        FIRED_UP()
        srv.lines.append({"kind": "ready", "time_epoch": round(clock.t, 6)})
        srv.warm = warm
        clock.advance(1.5)

    # ---- traffic through the load balancer: 6 chat completions
    engine.servers = [PS, DS]
    clock.advance(20.0)
    t0 = clock.t
    specs = [  # name, arrival (s after t0), prompt, prefix-cache hit, max_tokens, KV transfer (s), bootstrap (s)
        ("r0", 0.0, 1843, 0, 120, 0.012, 0.004),
        ("r1", 0.0, 2210, 0, 96, 0.400, 0.004),  # the slow KV transfer
        ("r2", 0.0, 512, 0, 64, 0.005, 0.004),
        ("r3", 0.0, 3071, 0, 150, 0.020, 0.004),
        ("r4", 0.445, 1290, 0, 80, 0.010, 0.003),
        ("r5", 0.440, 760, 512, 100, 0.008, 0.060),  # shares r0's first 512 tokens; slow bootstrap
    ]
    pairs = []
    for name, dt, prompt, cached, max_new, xfer, boot in specs:
        # scheduler receive time: router + HTTP + tokenizer, the same on both servers
        pair = Pair(name, t0 + dt + 0.002, prompt, max_new, cached, xfer, boot)
        pairs.append(pair)
        PS.arrivals.append(pair)
        DS.arrivals.append(pair)
    engine.run()
    assert all(p.p_done and p.d_done for p in pairs)
    clock.advance(2.0)
    for srv in (PS, DS):
        srv.access("GET", "/health", "10.0.0.5")
    common.restore_stdio()

    # ---- check every stats / timing / access line against what was given, and write the truth
    def ms(x):
        return f"{x * 1e3:.2f}ms"

    def epoch(perf):
        return START + (perf - clock.MONO_BASE)

    def timing(r):
        """What the installed code's convert_to_duration computes (re-stated to check the line),
        from the timestamps SGLang's own time_stats holds."""
        t = r.time_stats
        f = {k: getattr(t, k) for k in vars(t) if k.endswith("_time") and isinstance(getattr(t, k), float)
             and getattr(t, k) > 0}
        d: dict = {}
        prefill = t.disagg_mode == PREFILL
        if prefill:
            d["bootstrap_queue_s"] = t.wait_queue_entry_time - t.prefill_bootstrap_queue_entry_time
        else:
            d["prealloc_s"] = t.decode_transfer_queue_entry_time - t.decode_prealloc_queue_entry_time
            d["transfer_s"] = t.wait_queue_entry_time - t.decode_transfer_queue_entry_time
        d["queue_s"] = t.queue_duration_s if LAYOUT == "0.5.23" else t.forward_entry_time - t.wait_queue_entry_time
        d["forward_s"] = t.completion_time - t.forward_entry_time
        boot_done = getattr(t, "bootstrap_done_time", 0.0)
        if boot_done > 0:
            if prefill:
                d["bootstrap_s"] = boot_done - t.prefill_bootstrap_queue_entry_time
                if LAYOUT == "0.5.10":
                    d["alloc_wait_s"] = t.wait_queue_entry_time - boot_done
            else:
                d["bootstrap_s"] = boot_done - t.decode_prealloc_queue_entry_time
                d["alloc_wait_s"] = t.decode_transfer_queue_entry_time - boot_done
        start = t.prefill_bootstrap_queue_entry_time if prefill else t.decode_prealloc_queue_entry_time
        if prefill and LAYOUT in ("0.5.9", "0.5.10", "0.5.23"):
            d["transfer_speed_gb_s"] = t.transfer_speed_gb_s
            d["transfer_total_mb"] = t.transfer_total_mb
            if LAYOUT != "0.5.9":
                d["transfer_latency_s"] = t.completion_time - t.prefill_transfer_queue_entry_time
        # the printed text
        if LAYOUT == "0.5.3":
            s = (f"bootstrap_duration={ms(d['bootstrap_queue_s'])}, " if prefill else
                 f"prealloc_duration={ms(d['prealloc_s'])}, transfer_duration={ms(d['transfer_s'])}, ")
            s += f"queue_duration={ms(d['queue_s'])}, forward_duration={ms(d['forward_s'])}, start_time={start:.3f}"
        elif LAYOUT == "0.5.9":
            if prefill:
                s = (f"bootstrap_queue_duration({ms(d['bootstrap_queue_s'])}) = alloc_wait({ms(0)}) + bootstrap({ms(0)}) "
                     f"+ other({ms(max(0.0, d['bootstrap_queue_s']))}); ")
            else:
                s = (f"prealloc_queue_duration({ms(d['prealloc_s'])}) = alloc_wait({ms(0)}) + bootstrap({ms(0)}) "
                     f"+ other({ms(max(0.0, d['prealloc_s']))}); transfer_duration={ms(d['transfer_s'])}; ")
            s += f"queue_duration={ms(d['queue_s'])}, forward_duration={ms(d['forward_s'])}, start={start:.3f}"
            if prefill:
                s += f", transfer_speed={t.transfer_speed_gb_s:.2f}GB/s, transfer_total={t.transfer_total_mb:.2f}MB, #retries=0"
        elif LAYOUT == "0.5.10":
            s = (f"bootstrap_queue_duration({ms(d['bootstrap_queue_s'])}) " if prefill
                 else f"prealloc_queue_duration({ms(d['prealloc_s'])}) ")
            if "bootstrap_s" in d:
                s += f"= bootstrap({ms(d['bootstrap_s'])}) + alloc_wait({ms(d['alloc_wait_s'])}); "
            if not prefill:
                s += f"transfer_duration={ms(d['transfer_s'])}; "
            s += f"queue_duration={ms(d['queue_s'])}, forward_duration={ms(d['forward_s'])}, start={start:.3f}"
            if prefill:
                s += f", transfer_speed={t.transfer_speed_gb_s:.2f}GB/s, transfer_total={t.transfer_total_mb:.2f}MB, #retries=0"
        else:
            if prefill:
                s = f"bootstrap_duration={ms(d['bootstrap_s'])}, "
            else:
                s = (f"bootstrap_duration={ms(d['bootstrap_s'])}, alloc_wait_duration={ms(d['alloc_wait_s'])}, "
                     f"transfer_duration={ms(d['transfer_s'])}, ")
            s += (f"queue_duration={ms(d['queue_s'])}, forward_duration={ms(d['forward_s'])}, "
                  f"entry_time={epoch(start):.3f}")
            if prefill:
                s += f", transfer_speed={t.transfer_speed_gb_s:.2f} GB/s, transfer_total={t.transfer_total_mb:.2f} MB"
        stamps = {k[:-5]: round(epoch(v), 6) for k, v in sorted(f.items())
                  if k not in ("scheduler_recv_time", "last_forward_entry_time", "last_prefill_finished_time",
                               "last_decode_finish_time", "last_chunked_prefill_finish_time")}
        return d, s, stamps

    HEAD_RE = re.compile(
        r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] (?:Req Time Stats|ReqTimeStats)\(rid=(?P<rid>[0-9a-f]+), "
        r"bootstrap_room=(?P<room>\d+), input[ _]len=(?P<inp>\d+), (?:cached_input_len=(?P<cached>\d+), )?"
        r"output[ _]len=(?P<out>\d+), (?:attempts=(?P<att>\d+), )?type=(?P<type>prefill|decode)\): (?P<rest>.*)$")
    PRE_KEYS = {"0.5.3": ["#new-seq", "#new-token", "#cached-token", "token usage", "#running-req", "#queue-req",
                          "#prealloc-req", "#inflight-req", ""],
                "0.5.10": ["#new-seq", "#new-token", "#cached-token", "token usage", "#running-req", "#queue-req",
                           "#prealloc-req", "#inflight-req", "cuda graph", "input throughput (token/s)"],
                "0.5.23": ["#new-seq", "#new-token", "#cached-token", "token usage", "#running-req", "#queue-req",
                           "#pending-token", "#bootstrap-req", "#inflight-req", "#optimistic-req", "cuda graph",
                           "input throughput (token/s)"]}
    DEC_KEYS = ["#running-req", "#token", "token usage", "pre-allocated usage", "#prealloc-req", "#transfer-req",
                "#retracted-req", "cuda graph", "gen throughput (token/s)", "#queue-req"] + (
                    [""] if LAYOUT == "0.5.3" else [])

    def kv(line, word):
        head, _, body = line.partition(f"] {word} batch")
        assert body[:2] in (". ", ", "), line
        out = {}
        keys = []
        for part in body[2:].split(", "):
            k, _, v = part.partition(": ")
            keys.append(k)
            out[k] = v
        return head[1:], keys, out

    def check_server(srv):
        text = srv.sink.text()
        lines = text.split("\n")
        want = {k: [r for r in srv.lines if r["kind"] == k] for k in ("prefill", "decode", "req_time_stats", "access")}
        found = {"prefill": [i for i, ln in enumerate(lines) if "] Prefill batch" in ln],
                 "decode": [i for i, ln in enumerate(lines) if "] Decode batch" in ln],
                 "req_time_stats": [i for i, ln in enumerate(lines) if "Req Time Stats(" in ln or "ReqTimeStats(" in ln],
                 "access": [i for i, ln in enumerate(lines) if ' HTTP/1.1" ' in ln]}
        for k in want:
            assert len(want[k]) == len(found[k]), (srv.role, k, len(want[k]), len(found[k]))
            for r, i in zip(want[k], found[k]):
                r["log_line"] = i + 1
        for r in want["prefill"]:
            ts, keys, v = kv(lines[r["log_line"] - 1], "Prefill")
            assert ts == r["time_printed"] and keys == PRE_KEYS[LAYOUT], (ts, keys, r)
            assert (int(v["#new-seq"]), int(v["#new-token"]), int(v["#cached-token"])) == (
                r["new_seq"], r["new_token"], r["cached_token"]), (v, r)
            assert v["token usage"] == f"{r['token_usage']:.2f}" and int(v["#running-req"]) == r["running_req"], (v, r)
            assert int(v["#queue-req"]) == r["queue_req"] and int(v["#inflight-req"]) == r["inflight_req"], (v, r)
            if LAYOUT == "0.5.23":
                assert (int(v["#pending-token"]), int(v["#bootstrap-req"]), int(v["#optimistic-req"])) == (
                    r["pending_token"], r["bootstrap_req"], r["optimistic_req"]), (v, r)
            else:
                assert int(v["#prealloc-req"]) == r["prealloc_req"], (v, r)
            if "input_throughput" in r:
                assert v["input throughput (token/s)"] == f"{r['input_throughput']:.2f}", (v, r)
        for r in want["decode"]:
            ts, keys, v = kv(lines[r["log_line"] - 1], "Decode")
            assert ts == r["time_printed"] and keys == DEC_KEYS, (ts, keys)
            assert (int(v["#running-req"]), int(v["#token"]), int(v["#queue-req"])) == (
                r["running_req"], r["num_token"], r["queue_req"]), (v, r)
            assert v["token usage"] == f"{r['token_usage']:.2f}", (v, r)
            assert v["gen throughput (token/s)"] == f"{r['gen_throughput']:.2f}", (v, r)
            assert v["pre-allocated usage"] == f"{r['pre_allocated_usage']:.2f}", (v, r)
            assert (int(v["#prealloc-req"]), int(v["#transfer-req"]), int(v["#retracted-req"])) == (
                r["prealloc_req"], r["transfer_req"], r["retracted_req"]), (v, r)
        for r in want["req_time_stats"]:
            req = r.pop("_req")
            m = HEAD_RE.match(lines[r["log_line"] - 1])
            assert m, lines[r["log_line"] - 1]
            g = m.groupdict()
            assert g["ts"] == r["time_printed"] and g["rid"] == req.rid and int(g["room"]) == req.bootstrap_room
            assert g["type"] == srv.role
            assert (int(g["inp"]), int(g["out"])) == (len(req.origin_input_ids), len(req.output_ids))
            d, rest, stamps = timing(req)
            assert g["rest"] == rest, (g["rest"], rest)
            r.update(input_len=len(req.origin_input_ids), output_len=len(req.output_ids))
            if LAYOUT == "0.5.23":
                assert (int(g["cached"]), int(g["att"])) == (req.cached_tokens, req.prefill_attempt_count)
                r.update(cached_input_len=req.cached_tokens, attempts=req.prefill_attempt_count)
            r.update(computed=d, timestamps_epoch=stamps, printed=rest)
        for r in want["access"]:
            ln = lines[r["log_line"] - 1]
            assert f'{r["client"]}:' in ln and f'"{r["method"]} {r["path"]} HTTP/1.1" {r["status"]} ' in ln, ln
        return text

    texts = {srv.role: check_server(srv) for srv in (PS, DS)}

    def side(srv, r):
        row = next(x for x in srv.lines if x["kind"] == "req_time_stats" and x["rid"] == r.rid)
        return {k: row[k] for k in ("rid", "log_line", "time_printed", "input_len", "output_len", "computed",
                                    "timestamps_epoch", "printed") if k in row} | (
            {"cached_input_len": row["cached_input_len"]} if "cached_input_len" in row else {})

    requests = []
    for p in pairs:
        requests.append({
            "request": p.name, "bootstrap_room": p.room, "prompt_tokens": p.prompt,
            "prefix_cache_hit_tokens_on_prefill": p.cached, "max_tokens": p.max_new,
            "kv_transfer": {"modelled_duration_s": p.transfer_s, "bytes": p.prompt * kv_bytes_per_token,
                            "start_epoch": round(p.transfer_start, 6), "end_epoch": round(p.transfer_done_at, 6)},
            "bootstrap_handshake_modelled_s": p.bootstrap_s,
            "prefill": side(PS, p.p), "decode": side(DS, p.d)})
    warmups = {srv.role: side(srv, srv.warm.p if srv is PS else srv.warm.d) | {"bootstrap_room": 0,
                                                                              "bootstrap_host": fake_host}
               for srv in (PS, DS)}
    line_kinds = {
        "prefill_batch": {"0.5.3": "logged when the batch is formed (get_new_batch_prefill), before the new "
                                   "tokens are allocated: token usage counts the locked cached prefix only",
                          "0.5.9": None, "0.5.10": "logged after the batch ran (process_batch_result_disagg_prefill)",
                          "0.5.23": "logged after the batch ran (process_batch_result_disagg_prefill)"}[LAYOUT],
        "prefill_batch_absent_reason": None if LAYOUT != "0.5.9" else (
            "0.5.9 cannot write it: event_loop_*_disagg_prefill call process_batch_result_disagg_prefill "
            "(disaggregation/prefill.py), which never calls log_prefill_stats; its only callers are "
            "process_batch_result_prefill (scheduler_output_processor_mixin.py:331, 411), the non-PD path. "
            "The PD branch of log_prefill_stats (#prealloc-req/#inflight-req) is unreachable."),
        "decode_batch": "decode server only, every decode_log_interval decode batches (prebuilt batches do not count)",
        "req_time_stats": "Req Time Stats(...)" if LAYOUT != "0.5.23" else "ReqTimeStats(...)",
        "req_time_stats_transfer_fields": {
            "0.5.3": None, "0.5.9": "printed, always 0.00 (TimeStats.transfer_speed_gb_s / transfer_total_mb are never set)",
            "0.5.10": "computed by compute_and_observe_kv_transfer_metrics: len(origin_input_ids) pages x "
                      "sum(kv_item_lens) over (completion_time - prefill_transfer_queue_entry_time)",
            "0.5.23": "computed by compute_and_observe_kv_transfer_metrics from the sender's KVTransferMetric "
                      "(mooncake: no own latency, so completion_time - prefill_transfer_queue_entry_time); "
                      "skipped for the fake-bootstrap warm-up (0.00)"}[LAYOUT],
    }
    truth = {
        "engine": "sglang", "version": VERSION, "scenario": "pd", "timezone": "UTC",
        "logs": {"prefill": os.path.basename(OUT_BASE) + "-prefill.log",
                 "decode": os.path.basename(OUT_BASE) + "-decode.log"},
        "servers": {"prefill": "--disaggregation-mode prefill --port 30000 --max-total-tokens 40960 "
                               "--enable-request-time-stats-logging",
                    "decode": "--disaggregation-mode decode --port 30001 --max-total-tokens 40960 "
                              "--enable-request-time-stats-logging",
                    "router": "sglang_router mini_lb (10.0.0.5): same JSON to both servers plus bootstrap_host, "
                              "bootstrap_port, bootstrap_room = random.randint(0, 2**63 - 1)"},
        "join": {"key": "bootstrap_room",
                 "rid": "differs between the two logs: the router sends no rid, each server's tokenizer "
                        "(GenerateReqInput normalisation) assigns its own uuid4().hex",
                 "warmup": "each server's own PD warm-up request has bootstrap_room 0 (fake bootstrap host) "
                           "and no counterpart in the other log"},
        "line_kinds": line_kinds,
        "decode_log_interval": SERVER_ARGS.decode_log_interval,
        "max_total_num_tokens": MAX_TOTAL_TOKENS,
        "kv_bytes_per_token": kv_bytes_per_token,
        "units": {
            "computed": "seconds (…_s), GB/s, MB: what the installed time-stats code computes from its "
                        "perf_counter timestamps; the line prints them in ms (%.2f)",
            "timestamps_epoch": "the time_stats fields (perf_counter in the process) as UTC epoch seconds",
            "prefill.forward_s": "completion_time - forward_entry_time on the prefill server: the prefill "
                                 "forward plus the KV transfer, up to the loop iteration that polls it done",
            "decode.transfer_s": "wait_queue_entry_time - decode_transfer_queue_entry_time: from KV "
                                 "pre-allocation to the transfer seen done (includes the prefill server's "
                                 "queueing and forward)",
            "token_usage": "fraction 0..1 of max_total_num_tokens, printed %.2f",
            "pre_allocated_usage": "KV tokens pre-allocated for requests in the transfer queue / "
                                   "max_total_num_tokens, printed %.2f",
        },
        "requests": requests,
        "warmup": warmups,
        "lines": {role: [{k: v for k, v in r.items()} for r in srv.lines] for role, srv in (("prefill", PS), ("decode", DS))},
    }
    for role, text in texts.items():
        # <base>-<role>.truth.json: this log's lines alone, in the schema of the other fixtures' truth files
        # (tests/it/server_logs.rs reads every X.log with its X.truth.json); <base>.truth.json has the pair
        common.write_outputs(f"{OUT_BASE}-{role}", text, {
            "engine": "sglang", "version": VERSION, "scenario": f"pd-{role}", "timezone": "UTC",
            "pair_truth": os.path.basename(OUT_BASE) + ".truth.json",
            "decode_log_interval": SERVER_ARGS.decode_log_interval,
            "units": {k: truth["units"][k] for k in ("token_usage", "pre_allocated_usage")},
            "max_total_num_tokens": MAX_TOTAL_TOKENS, "lines": truth["lines"][role]})
    with open(OUT_BASE + ".truth.json", "w", encoding="utf-8") as f:
        json.dump(truth, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{OUT_BASE}-{{prefill,decode}}.log: {texts['prefill'].count(chr(10))} + "
          f"{texts['decode'].count(chr(10))} lines ({LAYOUT} layout)", file=sys.__stderr__)


if SCENARIO == "pd":
    pd_main()
    raise SystemExit(0)


run()
common.restore_stdio()
text = sink.text()

# ------------------------------------------------------------------ map and check
PREFILL_RE = re.compile(
    r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?P<pfx>(?: [A-Z_]+\d+)*)\] Prefill batch[.,] "
    r"#new-seq: (?P<new_seq>\d+), #new-token: (?P<new_token>\d+), #cached-token: (?P<cached>\d+), "
    r"token usage: (?P<usage>[\d.]+), #running-req: (?P<running>\d+), #queue-req: (?P<queue>\d+), ?"
    r"(?:#pending-token: (?P<pending>\d+), )?"
    r"(?:input throughput \(token/s\): (?P<in_tp_a>[\d.]+), )?"
    r"(?:cuda graph: (?P<graph>True|False))?(?:, input throughput \(token/s\): (?P<in_tp_b>[\d.]+))?$")
DECODE_RE = re.compile(
    r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?P<pfx>(?: [A-Z_]+\d+)*)\] Decode batch[.,] "
    r"#running-req: (?P<running>\d+), #token: (?P<num_token>\d+), token usage: (?P<usage>[\d.]+), "
    r"(?:accept len: (?P<accept_len>[\d.]+), )?(?:accept rate: (?P<accept_rate>[\d.]+), )?"
    r"cuda graph: (?P<graph>True|False), gen throughput \(token/s\): (?P<gen_tp>[\d.]+), "
    r"#queue-req: (?P<queue>\d+),? ?$")


def check(text: str) -> None:
    lines = text.split("\n")
    pre_at = [i for i, ln in enumerate(lines) if "] Prefill batch" in ln]
    dec_at = [i for i, ln in enumerate(lines) if "] Decode batch" in ln]
    want_pre = [r for r in truth_lines if r["kind"] == "prefill"]
    want_dec = [r for r in truth_lines if r["kind"] == "decode"]
    assert len(pre_at) == len(want_pre), (len(pre_at), len(want_pre))
    assert len(dec_at) == len(want_dec), (len(dec_at), len(want_dec))
    # lines of different processes interleave in time order; match each truth row to the next
    # unclaimed line with its prefix
    def assign(idx, rows):
        used = set()
        for r in rows:
            for i in idx:
                if i in used:
                    continue
                m = re.match(r"^\[[^\]]*?(?P<pfx>(?: [A-Z_]+\d+)*)\]", lines[i])
                if m and m.group("pfx") == r["prefix"]:
                    used.add(i)
                    r["log_line"] = i + 1
                    break
            else:
                raise AssertionError(("no line for", r))
    assign(pre_at, want_pre)
    assign(dec_at, want_dec)
    for r in want_pre:
        ln = lines[r["log_line"] - 1]
        m = PREFILL_RE.match(ln)
        assert m, repr(ln)
        g = m.groupdict()
        assert g["ts"] == r["time_printed"], (g["ts"], r)
        assert (int(g["new_seq"]), int(g["new_token"]), int(g["cached"])) == (r["new_seq"], r["new_token"], r["cached_token"]), ln
        assert g["usage"] == f"{r['token_usage']:.2f}", (g["usage"], r["token_usage"], ln)
        assert (int(g["running"]), int(g["queue"])) == (r["running_req"], r["queue_req"]), (ln, r)
        tp = g["in_tp_a"] or g["in_tp_b"]
        if "input_throughput" in r:
            assert tp == f"{r['input_throughput']:.2f}", (tp, r["input_throughput"], ln)
        else:
            assert tp is None, ln
        if "pending_token" in r:
            assert int(g["pending"]) == r["pending_token"], ln
    for r in want_dec:
        ln = lines[r["log_line"] - 1]
        m = DECODE_RE.match(ln)
        assert m, repr(ln)
        g = m.groupdict()
        assert g["ts"] == r["time_printed"], (g["ts"], r)
        assert (int(g["running"]), int(g["num_token"]), int(g["queue"])) == (r["running_req"], r["num_token"], r["queue_req"]), (ln, r)
        assert g["usage"] == f"{r['token_usage']:.2f}", ln
        assert g["gen_tp"] == f"{r['gen_throughput']:.2f}", (g["gen_tp"], r["gen_throughput"], ln)
        if "accept_len" in r:
            assert g["accept_len"] == f"{r['accept_len']:.2f}", (g["accept_len"], r["accept_len"], ln)
        if "accept_rate" in r:
            assert g["accept_rate"] == f"{r['accept_rate']:.2f}", (g["accept_rate"], r["accept_rate"], ln)
        else:
            assert g["accept_rate"] is None
    acc_at = [i for i, ln in enumerate(lines) if ' HTTP/1.1" ' in ln]
    want_acc = [r for r in truth_lines if r["kind"] == "access"]
    assert len(acc_at) == len(want_acc), (len(acc_at), len(want_acc))
    for i, r in zip(acc_at, want_acc):
        assert f'"{r["method"]} {r["path"]} HTTP/1.1" {r["status"]} ' in lines[i], lines[i]
        r["log_line"] = i + 1


check(text)
truth = {
    "engine": "sglang",
    "version": VERSION,
    "scenario": SCENARIO,
    "timezone": "UTC",
    "decode_log_interval": SERVER_ARGS.decode_log_interval,
    "units": {
        "token_usage": "fraction 0..1 of max_total_num_tokens (KV pool), printed %.2f; radix-cache "
                       "tokens that are evictable do not count as used",
        "gen_throughput": "tokens/s: tokens generated since the previous decode line / seconds since it",
        "input_throughput": "tokens/s (see README: which batch's tokens differs by release)",
        "accept_len": "mean tokens produced per request per verify step (includes the bonus token)",
        "accept_rate": "fraction 0..1 (definition differs by release, see README)",
    },
    "max_total_num_tokens": MAX_TOTAL_TOKENS,
    "lines": truth_lines,
}
common.write_outputs(OUT_BASE, text, truth)
print(f"{OUT_BASE}.log: {text.count(chr(10))} lines ({LAYOUT} layout)", file=sys.__stderr__)
