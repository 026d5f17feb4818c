"""Writes an SGLang server log made by SGLang's own logging code, with known stats values.

    python sglang_log.py SCENARIO OUT_BASE      (run with the interpreter of an SGLang venv)

writes OUT_BASE.log and OUT_BASE.truth.json. Scenarios:

  single   `python -m sglang.launch_server --model-path M` (tp 1, dp 1): no rank prefix
  spec     the same with EAGLE speculative decoding (`--speculative-algorithm EAGLE
           --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4`):
           decode lines carry "accept len" (and, from 0.5.9, "accept rate")
  dp2      `--tp 2 --dp 2 --enable-dp-attention`: two scheduler processes that both log,
           prefixes " DP0 TP0" and " DP1 TP1"

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
MAX_TOTAL_TOKENS = 455096
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
    maybe(KV_ALLOC, num_tokens=MAX_TOTAL_TOKENS, k_size_GB=27.78, v_size_GB=27.78)
    maybe(POOL_END, self=me, get_available_gpu_memory=lambda *a, **k: 7.42)
    clock.advance(6.2)
    if MAX_TOTAL is not None:
        MAX_TOTAL(self=me, server_args=SERVER_ARGS, avail_mem=6.86,
                  get_schedule=lambda: types.SimpleNamespace(chunked_prefill_size=8192))


def http_startup():
    enter(MAIN, None)
    if TEMPLATE is not None:
        TEMPLATE(self=types.SimpleNamespace(_jinja_template_content_format="string"))
    # set_uvicorn_logging_configs(server_args) edits uvicorn.config.LOGGING_CONFIG; uvicorn.run /
    # uvicorn.Config(app, host, port, log_level=...) then applies it in this process
    try:
        set_uvicorn_logging_configs(SERVER_ARGS)
    except TypeError:
        set_uvicorn_logging_configs()
    uvicorn.config.Config(object(), host="0.0.0.0", port=30000, log_level="info")
    enter(MAIN, None)
    UV_STARTED(process_id=os.getpid())
    UV_WAITING(self=types.SimpleNamespace(logger=logging.getLogger("uvicorn.error")))
    UV_COMPLETE(self=types.SimpleNamespace(logger=logging.getLogger("uvicorn.error")))
    UV_RUNNING(addr_format="%s://%s:%d", config=types.SimpleNamespace(ssl=None), protocol_name="http",
               host="0.0.0.0", port=30000, style=lambda s, **k: s)


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
