"""Writes a vLLM server log made by vLLM's own logging code, with known stats values.

    python vllm_log.py SCENARIO OUT_BASE      (run with the interpreter of a vLLM venv)

writes OUT_BASE.log and OUT_BASE.truth.json. Scenarios:

  single       one engine (`vllm serve MODEL`)
  single-nocolor  the same with NO_COLOR=1 (0.15.x: process prefix without ANSI codes)
  spec         one engine with speculative decoding (SpecDecoding metrics line)
  dp2          `--data-parallel-size 2 --api-server-count 1`: per-engine lines
               "Engine 000: ..." and "Engine 001: ..." (the default logger)
  dp2-agg      the same with `--aggregate-engine-logging`: "2 Engines Aggregated: ..."
  dp2-default  `--data-parallel-size 2` alone: api_server_count defaults to 2, each API
               server warns that stats logging is disabled, and no stats lines appear
  dp2-spec     dp2 with speculative decoding: each "Engine 00N: ..." line is followed by that
               engine's own SpecDecoding line (which names no engine); engine 0 accepts ~70 %
               of the drafted tokens, engine 1 ~30 %
  dp2-skew     dp2 where the load stops reaching engine 1 for 40 s while engine 0's queue grows
               to 22 (a starved rank); engine 1's idle lines go to DEBUG, as vLLM logs an idle
               engine, so its log falls silent after its first idle reading
  overload     one engine whose queue grows for a minute (KV cache full), then drains
  pd-nixl      disaggregated prefill/decode with the NIXL KV connector: a prefill server (:8100,
               kv_role kv_producer) and a decode server (:8200, kv_consumer), each its own run of this
               script (internal scenarios pd-nixl-prefill / pd-nixl-decode); writes OUT_BASE-prefill.log,
               OUT_BASE-decode.log (each with its .truth.json: pair_truth, server, requests, and
               "kv_transfer" rows) and OUT_BASE.truth.json (the pair: requests joined by id, both logs'
               rows). Eight requests (PD_REQUESTS); the decode server reads their KV with NIXL: 25-40 ms
               reads of 64-192 MiB, one slow 400 ms read, one failed read (ERROR "NIXL transfer
               failure" from the worker; 0.15 recomputes the prompt, 0.33 fails the request), whose
               blocks expire on the prefill server 30 s later (WARNING "Releasing expired KV blocks";
               0.15 started with VLLM_NIXL_ABORT_REQUEST_TIMEOUT=30). Every interval that recorded
               something gets a "KV Transfer metrics: ..." line right after its "Engine 000: ..." line
               (the decode's reads; the prefill's expiry: 0 successful transfers); the others none.

What runs is vLLM's: vllm.logger (its dictConfig, NewLineFormatter, the 0.33 process
name record factory), vllm.utils.system_utils.decorate_logs (0.15: the
"(APIServer pid=N) " prefix written into sys.stdout/sys.stderr), StatLoggerManager,
PerEngineStatLoggerAdapter, LoggingStatLogger, AggregatedLoggingStatLogger,
SpecDecodingLogging, CachingMetrics, SchedulerStats, IterationStats, PrefixCacheStats,
SpecDecodingStats, log_version_and_model; uvicorn's logging config and formatters
(the access line is issued with the exact call of uvicorn/protocols/http/h11_impl.py);
tqdm with vLLM's _BAR_FORMAT. Other start-up lines are vLLM's own logger calls
re-issued from their source location (common.SourceCall) with chosen values.

Stubbed (fakes.py from scripts/engines/vllm-trace, a permissive import-time fake): torch,
transformers, tokenizers, vllm.config, vllm.distributed (KVConnectorLogging is a fake;
with no KV connector configured the real one logs nothing), vllm.compilation, ...
PrometheusStatLogger is replaced by a no-op subclass handed to StatLoggerManager as a
custom logger (exactly what makes the manager skip its own Prometheus logger).

pd-nixl runs vLLM's KV-connector code too: under vllm.distributed (and 0.33's vllm.config)
the modules it needs are the wheel's (the packages above them stay fakes with the wheel's
__path__; 0.33 also fakes vllm.model_executor and vllm.v1.worker.utils, which its nixl
workers import): KVTransferConfig (from the CLI's JSON), KVConnectorFactory (resolves
"NixlConnector"), KVConnectorLogging (vllm/distributed/kv_transfer/kv_connector/v1/metrics.py,
writes the line), NixlKVConnectorStats (0.15: v1/nixl_connector.py, 0.33: v1/nixl/stats.py:
record_transfer, record_failed_transfer, record_kv_expired_req, clone_and_reset, reduce,
is_empty, aggregate), NixlConnector.build_kv_connector_stats, and the worker's own methods
(0.15 NixlConnectorWorker, 0.33 NixlPullConnectorWorker, made with object.__new__, its
GPU/NIXL __init__ not run): _pop_done_transfers (polls the handle, records the telemetry or
logs the failure and records it), _log_failure, _handle_failed_transfer,
get_kv_connector_stats, and 0.33's _reap_expired_send_leases (0.15's expiry is inline in
get_finished: its warning is re-issued with SourceCall, the record is the real method).
The NIXL agent is FakeNixlAgent (check_xfer_state / get_xfer_telemetry / release_xfer_handle
with chosen states and telemetry). The payload reaches the stats logger as vLLM carries it:
SchedulerStats.kv_connector_stats = the worker stats' .data (0.15) / .to_dict() (0.33), fed
through StatLoggerManager.record -> LoggingStatLogger.record -> KVConnectorLogging.observe.
The truth's KV figures are computed from PD_REQUESTS with fractions (kv_row), and the
driver checks each printed line against them (kv_expected_text) and that it follows its
engine's stats line.
"""

from __future__ import annotations

import importlib.metadata
import logging
import re
import multiprocessing
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "vllm-trace"))

import time as time_mod  # noqa: E402

import common  # noqa: E402
from common import Proc, Sink, SourceCall, VirtualClock  # noqa: E402

VERSION = importlib.metadata.version("vllm")
SCENARIO = sys.argv[1]
OUT_BASE = sys.argv[2]

# ------------------------------------------------------------------ pd-nixl: the plan of both servers
# One node, two GPUs: a prefill server (:8100, kv_producer) and a decode server (:8200, kv_consumer), both
# `--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":...}'`, behind a proxy on the same host that
# sends each request to the prefill server (max_tokens=1), then to the decode server with the prefill's
# kv_transfer_params. The decode server pulls the KV blocks with NIXL READs (pull mode, the default) and its
# worker records each read (NixlKVConnectorStats.record_transfer) when the handle polls DONE.
# Each request: prompt tokens, its 10-s logging interval (0-based, from the start of the traffic) and the engine
# step (0..3) of that interval in which the prefill server runs its prefill / the decode server's read completes;
# the read's duration and post time (NIXL telemetry, microseconds) or its failure.
PD_KV_BYTES_PER_TOKEN = 131072  # Llama-3.1-8B, bf16: 32 layers x (K, V) x 8 KV heads x 128 dims x 2 bytes
PD_BLOCK_SIZE = 16
PD_DESCS_PER_BLOCK = 64  # one NIXL descriptor per block per K/V region of each of the 32 layers
PD_REQUESTS = [
    dict(request="r1", prompt=760, max_tokens=128, interval=0, prefill_step=0, read_step=1, xfer_us=25104, post_us=412),
    dict(request="r2", prompt=1021, max_tokens=256, interval=0, prefill_step=1, read_step=2, xfer_us=31582, post_us=538),
    dict(request="r3", prompt=500, max_tokens=96, interval=1, prefill_step=0, read_step=0, xfer_us=22047, post_us=301),
    # the slow read: 160 MiB in 400 ms (~400 MB/s where the others move 3-5 GB/s)
    dict(request="r4", prompt=1270, max_tokens=256, interval=1, prefill_step=1, read_step=2, xfer_us=400216,
         post_us=655),
    dict(request="r5", prompt=1530, max_tokens=200, interval=1, prefill_step=2, read_step=3, xfer_us=38391, post_us=702),
    # the failed read (the handle polls ERR): the decode worker logs "NIXL transfer failure" and records it; the
    # prefill server's blocks for it are never released by a read notification and expire 30 s later
    dict(request="r6", prompt=900, max_tokens=128, interval=2, prefill_step=0, read_step=1, xfer_us=None, post_us=None),
    dict(request="r7", prompt=890, max_tokens=160, interval=2, prefill_step=2, read_step=3, xfer_us=28460, post_us=447),
    dict(request="r8", prompt=640, max_tokens=64, interval=5, prefill_step=1, read_step=2, xfer_us=26903, post_us=389),
]
PD_INTERVALS = 8
PD_EXPIRY_S = 30  # 0.33: kv_lease_duration (default 30 s); 0.15: VLLM_NIXL_ABORT_REQUEST_TIMEOUT=30 (default 480)
PD_ENGINE_IDS = {"prefill": "6a0c3f9e-2b41-4d8a-9e57-1f4b8c2d7a10", "decode": "d3b5e8a1-7c92-4f06-b1a4-58e2c9f03d6b"}
PD_PORTS = {"prefill": 8100, "decode": 8200}


def pd_blocks(r: dict) -> int:
    return -(-r["prompt"] // PD_BLOCK_SIZE)


def pd_request_id(r: dict) -> str:
    # toy_proxy_server.py: X-Request-Id = str(uuid.uuid4()), the same to both servers; here fixed
    import hashlib

    return "cmpl-" + hashlib.md5(f"pd-nixl {r['request']}".encode()).hexdigest() + "-0"


if SCENARIO == "pd-nixl":
    # Each server is its own run of this script (its own processes, logging set-up and clock: both started at the
    # same time); this run writes the pair's truth from theirs.
    import json
    import subprocess

    role_truth = {}
    for role in ("prefill", "decode"):
        subprocess.run([sys.executable, os.path.abspath(__file__), f"pd-nixl-{role}", f"{OUT_BASE}-{role}"],
                       check=True)
        with open(f"{OUT_BASE}-{role}.truth.json", encoding="utf-8") as f:
            role_truth[role] = json.load(f)
    by_role = {role: {r["request"]: r for r in t["requests"]} for role, t in role_truth.items()}
    requests = []
    for r in PD_REQUESTS:
        p, d = by_role["prefill"][r["request"]], by_role["decode"][r["request"]]
        requests.append({"request": r["request"], "request_id": pd_request_id(r), "prompt_tokens": r["prompt"],
                         "max_tokens": r["max_tokens"], "kv_blocks": pd_blocks(r),
                         "prefill": {k: v for k, v in p.items() if k != "request"},
                         "decode": {k: v for k, v in d.items() if k != "request"}})
    base = os.path.basename(OUT_BASE)
    pair = {
        "engine": "vllm", "version": VERSION, "scenario": "pd-nixl", "timezone": "UTC",
        "logs": {"prefill": base + "-prefill.log", "decode": base + "-decode.log"},
        "servers": {role: role_truth[role]["server"] for role in ("prefill", "decode")},
        "proxy": "one host (localhost), toy_proxy_server-style: POST /v1/completions to the prefill server with "
                 "max_tokens=1 and kv_transfer_params {do_remote_decode: true}, then to the decode server with the "
                 "kv_transfer_params the prefill returned; the same X-Request-Id to both",
        "kv_bytes_per_token": PD_KV_BYTES_PER_TOKEN, "block_size": PD_BLOCK_SIZE,
        "descriptors_per_block": PD_DESCS_PER_BLOCK,
        "log_stats_interval_s": 10.0,
        "units": role_truth["decode"]["units"],
        "requests": requests,
        "lines": {role: role_truth[role]["lines"] for role in ("prefill", "decode")},
    }
    with open(OUT_BASE + ".truth.json", "w", encoding="utf-8") as f:
        json.dump(pair, f, indent=1, ensure_ascii=False)
        f.write("\n")
    sys.exit(0)

PD_ROLE = SCENARIO[len("pd-nixl-"):] if SCENARIO.startswith("pd-nixl-") else None  # prefill | decode

# ------------------------------------------------------------------ environment
# Defaults of a plain `vllm serve`: no VLLM_* logging variables, output not a tty.
for var in list(os.environ):
    if var.startswith("VLLM_") or var in ("NO_COLOR", "FORCE_COLOR"):
        del os.environ[var]
if SCENARIO.endswith("-nocolor"):
    os.environ["NO_COLOR"] = "1"
if PD_ROLE == "prefill" and not VERSION.startswith("0.33"):
    # 0.15's prefill server frees KV blocks no decode read after VLLM_NIXL_ABORT_REQUEST_TIMEOUT (default 480 s):
    # started with 30, like 0.33's default kv_lease_duration, so the unread request's blocks expire in the log
    os.environ["VLLM_NIXL_ABORT_REQUEST_TIMEOUT"] = str(PD_EXPIRY_S)

START = {
    "single": 1762178700.0,  # 2025-11-03 14:05:00 UTC
    "single-nocolor": 1762178700.0,
    "spec": 1762182000.0,  # 2025-11-03 15:00:00 UTC
    "dp2": 1767225540.0,  # 2025-12-31 23:59:00 UTC: the log crosses midnight into a new year
    "dp2-agg": 1767225540.0,
    "dp2-default": 1767225540.0,
    "dp2-spec": 1762189200.0,  # 2025-11-03 17:00:00 UTC
    "overload": 1762185600.0,  # 2025-11-03 16:00:00 UTC
    "dp2-skew": 1762192800.0,  # 2025-11-03 18:00:00 UTC
    "pd-nixl-prefill": 1762196400.0,  # 2025-11-03 19:00:00 UTC: both servers of the pair started together
    "pd-nixl-decode": 1762196400.0,
}[SCENARIO]
SPEC = SCENARIO in ("spec", "dp2-spec")  # served with an EAGLE3 draft model
clock = VirtualClock(START)
clock.install()  # before tqdm / vllm are imported (tqdm binds time.time at import)

sink = Sink()
MAIN = Proc(sink, "MainProcess", 2811)
API = Proc(sink, "APIServer", 2812)
ENGINES = [Proc(sink, "EngineCore", 2975), Proc(sink, "EngineCore", 2976)]
if PD_ROLE:  # two servers on one host: their own pids
    base_pid = {"prefill": 3012, "decode": 3412}[PD_ROLE]
    API = Proc(sink, "APIServer", base_pid)
    ENGINES = [Proc(sink, "EngineCore", base_pid + 163)]
API_WORKERS = [Proc(sink, "ApiServer_0", 2870), Proc(sink, "ApiServer_1", 2871)]

# The API server process is the one that configures logging first (0.15: at `import vllm`).
first = MAIN if SCENARIO == "dp2-default" else API
first.enter()

import fakes  # noqa: E402

STUBS = {
    "0.33.0": ["torch", "vllm.config", "vllm.distributed", "vllm.multimodal", "vllm.compilation",
               "transformers", "tokenizers", "vllm.tokenizers", "uvloop", "cpuinfo"],
    "0.15.1": ["torch", "vllm.multimodal", "vllm.distributed", "transformers", "tokenizers",
               "vllm.tokenizers", "vllm.transformers_utils", "cpuinfo", "aiohttp"],
}
if PD_ROLE:
    # pd-nixl: the KV-connector code that writes and feeds the "KV Transfer metrics" line is vLLM's own. Under
    # vllm.distributed (and 0.33's vllm.config) only the modules named here are imported from the wheel; the
    # packages above them stay fakes (their __init__ pulls in torch.distributed) whose __path__ is the wheel's
    # folder. 0.33's registry imports the whole nixl package, whose workers import the model executor (torch
    # custom ops): vllm.model_executor and vllm.v1.worker.utils are faked for it.
    import importlib.machinery
    import importlib.util

    _VROOT = os.path.dirname(importlib.util.find_spec("vllm").origin)
    _KV = "vllm.distributed.kv_transfer.kv_connector"
    _REAL = {f"{_KV}.factory", f"{_KV}.base", f"{_KV}.utils", f"{_KV}.v1", f"{_KV}.v1.base", f"{_KV}.v1.metrics"}
    if VERSION.startswith("0.33"):
        _REAL |= {f"{_KV}.v1.nixl"} | {f"{_KV}.v1.nixl.{m}" for m in (
            "stats", "connector", "metadata", "utils", "tp_mapping", "base_scheduler", "pull_scheduler",
            "push_scheduler", "scheduler", "base_worker", "pull_worker", "push_worker", "worker")}
        _REAL |= {"vllm.config.kv_transfer", "vllm.config.utils"}
        STUBS[VERSION] = [m for m in STUBS[VERSION] if m != "vllm.config"] + ["vllm.model_executor",
                                                                              "vllm.v1.worker.utils"]
    else:
        _REAL |= {f"{_KV}.v1.nixl_connector"}
    STUBS[VERSION] = [m for m in STUBS[VERSION] if m != "vllm.distributed"]

    class _PartlyReal(fakes._Finder):
        def find_spec(self, name, path=None, target=None):
            if not self.covers(name) or name in _REAL:
                return None  # the wheel's file, found through the fake parent's __path__
            return importlib.machinery.ModuleSpec(name, self, is_package=True)

        def create_module(self, spec):
            module = fakes.FakeModule(spec.name)
            folder = os.path.join(_VROOT, *spec.name.split(".")[1:])
            module.__path__ = [folder] if os.path.isdir(folder) else []
            return module

fakes.install(STUBS[VERSION], {"torch.__version__": "0.0.0+fake"})
if PD_ROLE:
    sys.meta_path.insert(0, _PartlyReal(["vllm.distributed"] + (["vllm.config"] if VERSION.startswith("0.33") else [])))

import vllm.logger as vlogger  # noqa: E402
from vllm.v1.metrics import loggers as L  # noqa: E402
from vllm.v1.metrics.stats import IterationStats, PrefixCacheStats, SchedulerStats  # noqa: E402
from vllm.v1.spec_decode.metrics import SpecDecodingStats  # noqa: E402
import vllm.utils.system_utils as system_utils  # noqa: E402

VLLM_ROOT = os.path.dirname(vlogger.__file__)
NEW = hasattr(vlogger, "set_vllm_process_name")  # 0.33: prefix in the formatter

if NEW:
    # `vllm serve` calls configure_logging_from_args(args) -> configure_logging(LoggingConfig());
    # LoggingConfig() takes its defaults from the same envs that config=None reads.
    vlogger._configure_vllm_root_logger(None)
VLLM_HANDLER = logging.getLogger("vllm").handlers[0]
if PD_ROLE:
    from vllm.config.kv_transfer import KVTransferConfig  # noqa: E402
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory  # noqa: E402
    from vllm.distributed.kv_transfer.kv_connector.v1.metrics import KVConnectorLogging  # noqa: E402

    assert L.KVConnectorLogging is KVConnectorLogging  # the stats logger's own, not a fake
    # `--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'` (kv_consumer on the decode
    # server), parsed by the CLI into vLLM's KVTransferConfig; engine_id (a uuid4 by default) fixed here
    KV_CFG = KVTransferConfig(kv_connector="NixlConnector",
                              kv_role={"prefill": "kv_producer", "decode": "kv_consumer"}[PD_ROLE],
                              engine_id=PD_ENGINE_IDS[PD_ROLE])
    # the connector class the registry names (KVConnectorLogging calls this too); imported now so that what the
    # import logs (0.15: "NIXL is not available" here) is dropped with the other import-time output
    NIXL_CONNECTOR = KVConnectorFactory.get_connector_class(KV_CFG)
    NIXL_MOD = sys.modules[NIXL_CONNECTOR.__module__]
    if VERSION.startswith("0.33"):
        from vllm.distributed.kv_transfer.kv_connector.v1.nixl.pull_worker import (  # noqa: E402
            NixlPullConnectorWorker as NixlWorker)
        from vllm.distributed.kv_transfer.kv_connector.v1.nixl.stats import NixlKVConnectorStats  # noqa: E402
    else:
        NixlWorker = NIXL_MOD.NixlConnectorWorker
        NixlKVConnectorStats = NIXL_MOD.NixlKVConnectorStats
    assert NIXL_CONNECTOR.build_kv_connector_stats().__class__ is NixlKVConnectorStats
    import vllm.envs as vllm_envs  # noqa: E402

    if not NEW:  # 0.15: the prefill worker's warning, inline in NixlConnectorWorker.get_finished
        EXPIRED_WARNING = SourceCall(VLLM_ROOT, "distributed/kv_transfer/kv_connector/v1/nixl_connector.py",
                                     "Releasing expired KV blocks for request", NIXL_MOD.logger.name)
sink.clear()  # drop what importing printed (e.g. "Triton not installed")

import uvicorn.config  # noqa: E402
import uvicorn.protocols.utils as uv_utils  # noqa: E402
import tqdm as tqdm_mod  # noqa: E402

UVICORN_ROOT = os.path.dirname(uvicorn.config.__file__)


def switch(proc: Proc) -> Proc:
    """Make `proc` the running process: its pid, its stdio, and (as dictConfig in that
    process would have bound it) the vLLM handler writing to its stdout."""
    proc.enter()
    # per-process state a real process would keep to itself
    multiprocessing.current_process().name = getattr(proc, "mp_name", "MainProcess")
    if NEW:
        vlogger._vllm_process_info = getattr(proc, "vllm_info", None)
    VLLM_HANDLER.setStream(proc.stdout)
    # uvicorn's LOGGING_CONFIG binds "default" to sys.stderr and "access" to sys.stdout of the
    # process that runs uvicorn.Config(...)
    for h in logging.getLogger("uvicorn").handlers:
        h.setStream(proc.stderr)
    for h in logging.getLogger("uvicorn.access").handlers:
        h.setStream(proc.stdout)
    return proc


def decorate(proc: Proc, mp_name: str) -> None:
    """Run vLLM's decorate_logs() in `proc` as the real process does (process_name=None
    -> the multiprocessing process name, which vLLM gives its child processes)."""
    proc.mp_name = mp_name
    switch(proc)
    system_utils.decorate_logs()
    save_decoration(proc)


def save_decoration(proc: Proc) -> None:
    if NEW:
        proc.vllm_info = vlogger._vllm_process_info


# ------------------------------------------------------------------ log sources
def call(rel, needle, logger_name, occurrence=0):
    return SourceCall(VLLM_ROOT, rel, needle, logger_name, occurrence)


def try_call(candidates, logger_name):
    for rel, needle in candidates:
        try:
            return call(rel, needle, logger_name)
        except (common.SourceCallNotFound, FileNotFoundError):
            continue
    raise common.SourceCallNotFound(str(candidates))


NONDEFAULT = try_call([("entrypoints/utils.py", "non-default args"),
                       ("entrypoints/common/startup.py", "non-default args")], "vllm.entrypoints.utils")
RESOLVED_ARCH = call("config/model.py", "Resolved architecture", "vllm.config.model")
MAX_MODEL_LEN = call("config/model.py", "Using max model len", "vllm.config.model")
INIT_ENGINE_CFG = call("v1/engine/core.py", "Initializing a V1 LLM engine", "vllm.v1.engine.core")
START_LOAD = call("v1/worker/gpu_model_runner.py", "Starting to load model", "vllm.v1.worker.gpu_model_runner")
WEIGHTS_TOOK = call("model_executor/model_loader/default_loader.py", "Loading weights took",
                    "vllm.model_executor.model_loader.default_loader")
MODEL_LOADING = call("v1/worker/gpu_model_runner.py", "Model loading took", "vllm.v1.worker.gpu_model_runner")
KV_MEM = call("v1/worker/gpu_worker.py", "Available KV cache memory", "vllm.v1.worker.gpu_worker")
KV_SIZE = call("v1/core/kv_cache_utils.py", "GPU KV cache size: %s tokens", "vllm.v1.core.kv_cache_utils") \
    if "GPU KV cache size: %s tokens" in open(os.path.join(VLLM_ROOT, "v1/core/kv_cache_utils.py")).read() else None
MAX_CONC = call("v1/core/kv_cache_utils.py", "Maximum concurrency for", "vllm.v1.core.kv_cache_utils")
INIT_TOOK = try_call([("v1/engine/core.py", '"%.2f s (compilation: %.2f s)",'),  # 0.33, torch.compile on (default)
                      ("v1/engine/core.py", "init engine (profile, create kv cache, warmup model) took %.2f")],
                     "vllm.v1.engine.core")
if NEW:
    STARTING = call("entrypoints/launchers/api_server/entry.py", "Starting vLLM server on",
                    "vllm.entrypoints.launchers.api_server.entry")
    ROUTES = call("entrypoints/launchers/launcher.py", "Available routes are", "vllm.entrypoints.launchers.launcher")
    ROUTE = call("entrypoints/launchers/launcher.py", "Route: %s, Methods: %s", "vllm.entrypoints.launchers.launcher")
    # 0.33 logs the ignored-fields message at DEBUG; a request with a removed guided-decoding
    # field gets a WARNING instead
    IGNORED = call("entrypoints/serve/engine/protocol.py", "Request contains the removed guided-decoding field",
                   "vllm.entrypoints.serve.engine.protocol")
    CHAT_FMT = call("renderers/hf.py", "Detected the chat template content format", "vllm.renderers.hf")
    DEFAULT_API_COUNT = call("entrypoints/cli/serve.py", "Defaulting api_server_count to data_parallel_size (",
                             "vllm.entrypoints.cli.serve")
else:
    STARTING = call("entrypoints/openai/api_server.py", "Starting vLLM API server", "vllm.entrypoints.openai.api_server")
    ROUTES = call("entrypoints/launcher.py", "Available routes are", "vllm.entrypoints.launcher")
    ROUTE = call("entrypoints/launcher.py", "Route: %s, Methods: %s", "vllm.entrypoints.launcher")
    IGNORED = call("entrypoints/openai/engine/protocol.py", "present in the request but ignored",
                   "vllm.entrypoints.openai.engine.protocol")
    CHAT_FMT = call("renderers/hf.py", "Detected the chat template content format", "vllm.renderers.hf")
    DEFAULT_API_COUNT = call("entrypoints/cli/serve.py", "Defaulting api_server_count to data_parallel_size (",
                             "vllm.entrypoints.cli.serve")

UV_STARTED = SourceCall(UVICORN_ROOT, "server.py", "Started server process [%d]", "uvicorn.error")
UV_WAITING = SourceCall(UVICORN_ROOT, "lifespan/on.py", "Waiting for application startup.", "uvicorn.error")
UV_COMPLETE = SourceCall(UVICORN_ROOT, "lifespan/on.py", "Application startup complete.", "uvicorn.error")
UV_ACCESS = SourceCall(UVICORN_ROOT, "protocols/http/h11_impl.py", '%s - "%s %s HTTP/%s" %d', "uvicorn.access")


def _bar_format() -> str:
    return common.module_constant(os.path.join(VLLM_ROOT, "model_executor/model_loader/weight_utils.py"),
                                  "_BAR_FORMAT")


MODEL = "meta-llama/Llama-3.1-8B-Instruct"
truth_lines: list[dict] = []


# ------------------------------------------------------------------ uvicorn (API server process)
class _App:  # uvicorn.Config needs an app object; it is never called
    async def __call__(self, scope, receive, send):  # pragma: no cover
        pass


def start_uvicorn() -> None:
    # vLLM's serve_http builds uvicorn.Config(app, **kwargs) (no log_config: uvicorn's
    # LOGGING_CONFIG, streams bound to this process's stdout/stderr) and serves on the socket
    # vLLM opened, so uvicorn does not log "Uvicorn running on ...".
    uvicorn.config.Config(_App(), host="0.0.0.0", port=8000, log_level="info", access_log=True)
    UV_STARTED(process_id=os.getpid())
    UV_WAITING(self=common.ns(logger=logging.getLogger("uvicorn.error")))
    UV_COMPLETE(self=common.ns(logger=logging.getLogger("uvicorn.error")))


def access(client_port: int, method: str, path: str, status: int) -> None:
    scope = {"client": ("127.0.0.1", client_port), "method": method, "path": path, "query_string": b"",
             "root_path": "", "http_version": "1.1"}
    UV_ACCESS(self=common.ns(access_logger=logging.getLogger("uvicorn.access"), scope=scope),
              get_client_addr=uv_utils.get_client_addr,
              get_path_with_query_string=uv_utils.get_path_with_query_string, status=status)
    truth_lines.append({"kind": "access", "method": method, "path": path, "status": status})


# ------------------------------------------------------------------ start-up
def engine_startup(proc: Proc, mp_name: str, dp_rank: int | None) -> None:
    decorate(proc, mp_name)
    cfg = (f"model='{MODEL}', speculative_config={'None' if not SPEC else 'SpeculativeConfig(method=eagle3, model=yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, num_spec_tokens=3)'}, "
           f"tokenizer='{MODEL}', skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, "
           "trust_remote_code=False, dtype=torch.bfloat16, max_seq_len=131072, download_dir=None, "
           "load_format=auto, tensor_parallel_size=1, pipeline_parallel_size=1, "
           f"data_parallel_size={1 if dp_rank is None else 2}, disable_custom_all_reduce=False, "
           "quantization=None, enforce_eager=False, kv_cache_dtype=auto, device_config=cuda, "
           f"seed=0, served_model_name={MODEL}, enable_prefix_caching={SCENARIO != 'spec'}, enable_chunked_prefill=True")
    INIT_ENGINE_CFG(VLLM_VERSION=VERSION, vllm_config=cfg, self=common.ns(vllm_config=cfg))
    clock.advance(2.1)
    START_LOAD(self=common.ns(model_config=common.ns(model=MODEL)))
    clock.advance(0.4)
    if dp_rank in (None, 0):
        # vLLM's safetensors loader: tqdm(..., bar_format=_BAR_FORMAT) on sys.stderr, rank 0 only.
        for _ in tqdm_mod.tqdm(range(4), desc="Loading safetensors checkpoint shards",
                               bar_format=_bar_format()):
            clock.advance(0.61)
    else:
        clock.advance(2.44)
    WEIGHTS_TOOK(self=common.ns(counter_after_loading_weights=12.0, counter_before_loading_weights=9.56),
                 counter_after_loading_weights=12.0, counter_before_loading_weights=9.56)
    MODEL_LOADING(format_gib=lambda b: f"{b / (1 << 30):.4f}".rstrip("0").rstrip("."), self=common.ns(
        model_memory_usage=16060522496, model_loading_time=3.125), model_memory_usage=16060522496,
        time_after_load=12.9, time_before_load=9.775, GiB_bytes=1 << 30)
    clock.advance(6.3)
    KV_MEM(format_gib=lambda b: f"{b / (1 << 30):.2f}", available_kv_cache_memory=52.03 * (1 << 30),
           available_kv_cache_memory_gib=52.03, self=common.ns(available_kv_cache_memory_bytes=int(52.03 * (1 << 30))),
           GiB_bytes=1 << 30)
    if KV_SIZE is not None:
        KV_SIZE(num_tokens_str="426,208", num_tokens=426208)
    MAX_CONC(max_model_len_str="131,072", max_concurrency=3.25, max_model_len=131072, num_tokens=426208,
             pools="GPU", vllm_config=common.ns(model_config=common.ns(max_model_len=131072)))
    clock.advance(14.2)
    INIT_TOOK(elapsed=25.37, compile_time=11.84)


def api_startup() -> None:
    # 0.15 decorate_logs("APIServer") / 0.33 decorate_logs("APIServer", skip_if_decorated=True)
    switch(API)
    if NEW:
        system_utils.decorate_logs("APIServer", skip_if_decorated=True)
    else:
        system_utils.decorate_logs("APIServer")
    save_decoration(API)
    version_and_args(logging.getLogger("vllm.entrypoints.launchers.launcher" if NEW else
                                       "vllm.entrypoints.openai.api_server"))
    clock.advance(1.7)
    RESOLVED_ARCH(arch="LlamaForCausalLM")
    MAX_MODEL_LEN(max_model_len=131072)


def version_and_args(api_logger) -> None:
    # log_version_and_model (0.15: entrypoints/utils.py, 0.33: entrypoints/common/startup.py), cut
    # out of its file (the module itself imports fastapi) and run as written.
    from string import Template

    import vllm.envs as envs
    rel = "entrypoints/common/startup.py" if NEW else "entrypoints/utils.py"
    lvm = common.extract_def(os.path.join(VLLM_ROOT, rel), "log_version_and_model",
                             {"envs": envs, "current_formatter_type": vlogger.current_formatter_type,
                              "Template": Template, "Logger": logging.Logger})
    lvm(api_logger, VERSION, MODEL)
    args = {"model_tag": MODEL, "enable_prefix_caching": SCENARIO != "spec"}
    if PD_ROLE:
        args = {"model_tag": MODEL, "port": PD_PORTS[PD_ROLE], "enable_prefix_caching": True,
                "kv_transfer_config": KV_CFG}
    if SPEC:
        args["speculative_config"] = {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
                                      "num_speculative_tokens": 3}
    if SCENARIO.startswith("dp2"):
        args["data_parallel_size"] = 2
        if SCENARIO != "dp2-default":
            args["api_server_count"] = 1
        if SCENARIO == "dp2-agg":
            args["aggregate_engine_logging"] = True
    NONDEFAULT(non_default_args=args, redact_sensitive_args=lambda a: a)


def api_ready(listen="http://0.0.0.0:8000", rank=0) -> None:
    switch(API)
    if NEW:
        STARTING(listen_address=listen)
    else:
        STARTING(engine_client=common.ns(vllm_config=common.ns(parallel_config=common.ns(_api_process_rank=rank))),
                 listen_address=listen)
    ROUTES()
    for path, methods in [("/openapi.json", {"GET", "HEAD"}), ("/health", {"GET"}), ("/metrics", {"GET"}),
                          ("/v1/models", {"GET"}), ("/v1/chat/completions", {"POST"}),
                          ("/v1/completions", {"POST"})]:
        ROUTE(path=path, methods=sorted(methods))
    start_uvicorn()


# ------------------------------------------------------------------ stats
class NoProm(L.PrometheusStatLogger):
    def __init__(self, vllm_config, engine_indexes=None):
        self.engine_indexes = engine_indexes or [0]

    def record(self, *a, **k):
        pass

    def record_sleep_state(self, *a, **k):
        pass

    def log_engine_initialized(self):
        pass

    def log(self):
        pass


def vllm_config():
    return common.ns(
        kv_transfer_config=KV_CFG if PD_ROLE else None, ec_transfer_config=None,
        observability_config=common.ns(cudagraph_metrics=False, enable_mfu_metrics=False),
        cache_config=common.ns(num_gpu_blocks=26638),
        device_config=common.ns(device_type="cuda"),
        model_config=common.ns(is_diffusion=False),
        compilation_config=common.ns(),
    )


def make_manager(engines: list[int], aggregate: bool, client_count: int):
    kw = dict(engine_idxs=engines, custom_stat_loggers=[NoProm], aggregate_engine_logging=aggregate,
              client_count=client_count)
    mgr = L.StatLoggerManager(vllm_config(), **kw)
    mgr.log_engine_initialized()
    return mgr


def iteration(prompt: int, gen: int, preempted: int = 0, prompt_total: int | None = None) -> IterationStats:
    it = IterationStats()
    it.num_generation_tokens = gen
    it.num_preempted_reqs = preempted
    if hasattr(it, "prompt_token_stats"):  # 0.33: throughput counts computed (non-cached) prompt tokens
        it.prompt_token_stats.computed = prompt
        it.prompt_token_stats.total = prompt if prompt_total is None else prompt_total
        if prompt_total is not None:
            it.prompt_token_stats.external_kv_transfer = prompt_total - prompt
            it.prompt_token_stats.cached_tokens = prompt_total - prompt
    else:
        it.num_prompt_tokens = prompt
    return it


def sched(running: int, waiting: int, kv: float, prefix=None, spec=None, ext_prefix=None,
          kv_connector_stats=None) -> SchedulerStats:
    s = SchedulerStats(num_running_reqs=running, num_waiting_reqs=waiting, kv_cache_usage=kv)
    if prefix:
        s.prefix_cache_stats = PrefixCacheStats(requests=prefix[0], queries=prefix[1], hits=prefix[2])
    if ext_prefix:  # the scheduler's connector_prefix_cache_stats (what the KV connector had for the requests)
        s.connector_prefix_cache_stats = PrefixCacheStats(requests=ext_prefix[0], queries=ext_prefix[1],
                                                          hits=ext_prefix[2])
    s.kv_connector_stats = kv_connector_stats
    if spec:
        num_drafts, accepted_per_draft, k = spec  # list of accepted counts per draft, k = num_spec_tokens
        st = SpecDecodingStats.new(k)
        for a in accepted_per_draft:
            st.observe_draft(num_draft_tokens=k, num_accepted_tokens=a)
        s.spec_decoding_stats = st
    return s


class StatsRun:
    """Feeds StatLoggerManager.record() per engine step and calls .log() every interval,
    as AsyncLLM's output handler and the API server's _force_log task do, and works out
    from the values it passed what each logger must print (the truth)."""

    def __init__(self, mgr, engines, created_mono):
        self.mgr = mgr
        self.engines = engines
        self.aggregated = SCENARIO == "dp2-agg"
        keys = ["agg"] if self.aggregated else list(engines)
        # per logger: last log time (LoggingStatLogger._reset at construction), cumulative
        # prefix-cache queries/hits (CachingMetrics keeps the last <=1000 requests; fewer here),
        # throughputs of the previous interval (idle suppression), spec-decoding window
        self.st = {k: {"last": created_mono, "q": 0, "h": 0, "prev": (0.0, 0.0),
                       "spec_last": created_mono, "spec": [], "eq": 0, "eh": 0} for k in keys}

    def interval(self, seconds, per_engine, accesses=(), hook=None):
        """per_engine: {e: dict(prompt, gen, running, waiting, kv, prefix=(req, q, hits) or None,
        spec=(drafts, [accepted per draft], k) or None, preempted)};
        accesses: [(port, method, path, status)].
        pd-nixl: v["steps"] gives each of the 4 steps its own values (prompt, prompt_total, gen, running,
        waiting, kv, prefix, ext_prefix), and hook(step) runs the engine's side of the step (the NIXL worker)
        and returns the KV connector stats payload that step's SchedulerStats carries (or None)."""
        steps = 4
        for step in range(steps):
            clock.advance(seconds / (steps + 1))
            payload = hook(step) if hook else None
            for e in self.engines:
                v = per_engine[e]
                if "steps" in v:
                    w = v["steps"][step]
                    self.mgr.record(
                        scheduler_stats=sched(w["running"], w["waiting"], w["kv"], w.get("prefix"),
                                              ext_prefix=w.get("ext_prefix"), kv_connector_stats=payload),
                        iteration_stats=iteration(w["prompt"], w["gen"], prompt_total=w.get("prompt_total")),
                        engine_idx=e)
                    continue
                share = lambda x: (x // steps) + (x % steps if step == steps - 1 else 0)  # noqa: E731
                self.mgr.record(
                    scheduler_stats=sched(v["running"], v["waiting"], v["kv"],
                                          v.get("prefix") if step == 0 else None,
                                          v.get("spec") if step == 0 else None),
                    iteration_stats=iteration(share(v["prompt"]), share(v["gen"]),
                                              v.get("preempted", 0) if step == 0 else 0),
                    engine_idx=e)
            if step == 1:
                for a in accesses:
                    access(*a)
        clock.advance(seconds / (steps + 1))
        now = clock.mono()
        rows = self._expected(per_engine, now)
        self.mgr.log()
        truth_lines.extend(rows)

    def _expected(self, per_engine, now):
        groups = [("agg", self.engines)] if self.aggregated else [(e, [e]) for e in self.engines]
        rows = []
        for key, members in groups:
            st = self.st[key]
            vs = [per_engine[e] for e in members]
            prompt = sum(v["prompt"] for v in vs)
            gen = sum(v["gen"] for v in vs)
            elapsed = now - st["last"]
            st["last"] = now
            pt, gt = prompt / elapsed, gen / elapsed
            idle = not any((pt, gt) + st["prev"])
            st["prev"] = (pt, gt)
            for v in vs:
                if v.get("prefix"):
                    st["q"] += v["prefix"][1]
                    st["h"] += v["prefix"][2]
            kv = sum(v["kv"] for v in vs) / len(vs)
            t = clock.t
            row = {
                "kind": "stats",
                "emitted": not idle,  # an idle engine's line goes to DEBUG (not printed at INFO)
                "time_epoch": round(t, 3),
                "time_iso": common.iso(t),
                "time_printed": time_mod.strftime("%m-%d %H:%M:%S", time_mod.gmtime(t)),
                "engine": None if key == "agg" else key,
                "aggregated_engines": len(members) if key == "agg" else None,
                "interval_s": round(elapsed, 6),
                "prompt_tokens": prompt,
                "generation_tokens": gen,
                "prompt_throughput": pt,
                "generation_throughput": gt,
                "running": sum(v["running"] for v in vs),
                "waiting": sum(v["waiting"] for v in vs),
                "preemptions": sum(v.get("preempted", 0) for v in vs),
                "preemptions_printed": False,
                "kv_cache_usage": kv,
                "prefix_cache_queries_cum": st["q"],
                "prefix_cache_hits_cum": st["h"],
                "prefix_cache_hit_rate": (st["h"] / st["q"]) if st["q"] else 0.0,
                "prefix_cache_hit_rate_printed": (st["q"] > 0) or not NEW,
            }
            if PD_ROLE:
                # "External prefix cache hit rate: %.1f%%" (connector_prefix_caching_metrics), printed once the
                # connector was asked about any request: a KV connector is configured
                for v in vs:
                    if v.get("ext_prefix"):
                        st["eq"] += v["ext_prefix"][1]
                        st["eh"] += v["ext_prefix"][2]
                row["external_prefix_cache_queries_cum"] = st["eq"]
                row["external_prefix_cache_hits_cum"] = st["eh"]
                row["external_prefix_cache_hit_rate"] = (st["eh"] / st["eq"]) if st["eq"] else 0.0
                row["external_prefix_cache_hit_rate_printed"] = st["eq"] > 0
            rows.append(row)
            for v in vs:
                if v.get("kv_expected"):
                    # KVConnectorLogging.log(log_fn=log_fn) after the stats (and SpecDecoding) line: the same
                    # log_fn, so at DEBUG with the idle engine's line
                    rows.append(dict(kv_row(v["kv_expected"], row), emitted=not idle))
            for v in vs:
                if v.get("spec"):
                    st["spec"].append(v["spec"])
            if st["spec"] and not idle:
                drafts = sum(sp[0] for sp in st["spec"])
                acc_list = [a for sp in st["spec"] for a in sp[1]]
                k = st["spec"][0][2]
                acc = sum(acc_list)
                spec_elapsed = now - st["spec_last"]
                st["spec_last"] = now
                st["spec"] = []
                rows.append({
                    "kind": "spec",
                    "emitted": True,
                    "time_epoch": round(t, 3),
                    "time_iso": common.iso(t),
                    "time_printed": row["time_printed"],
                    "engine": row["engine"],  # not printed: the SpecDecoding line has no engine prefix
                    "interval_s": round(spec_elapsed, 6),  # since the previous SpecDecoding line
                    "num_drafts": drafts,
                    "num_spec_tokens": k,
                    "draft_tokens": drafts * k,
                    "accepted_tokens": acc,
                    "mean_acceptance_length": 1 + acc / drafts,
                    "accepted_throughput": acc / spec_elapsed,
                    "drafted_throughput": drafts * k / spec_elapsed,
                    "draft_acceptance_rate": acc / (drafts * k),
                    "per_position_acceptance_rate": [sum(1 for a in acc_list if a > i) / drafts for i in range(k)],
                })
        return rows


# ------------------------------------------------------------------ scenarios
# dp2-spec: tokens accepted per draft (of 3), cycled; engine 0 accepts 21 of 30 drafted tokens
# (70 %), engine 1 9 of 30 (30 %), so a SpecDecoding line read onto the wrong engine shows
DP_SPEC_PATTERNS = {0: [3, 3, 2, 1, 3, 2, 1, 2, 3, 1], 1: [1, 0, 2, 0, 1, 0, 1, 3, 0, 1]}


def traffic(engines, mgr, created_mono, base_port=41230):
    """Eight 10-s intervals of varied load (the API server's _force_log period)."""
    run = StatsRun(mgr, engines, created_mono)
    port = [base_port]

    def acc(n, path="/v1/chat/completions", status=200, method="POST"):
        out = []
        for _ in range(n):
            port[0] += 2
            out.append((port[0], method, path, status))
        return out

    def spread(d):
        # engine 1 (if any) gets a different load than engine 0
        res = {}
        for e in engines:
            v = dict(d)
            if e == 1:
                v = {k: (int(x * 0.6) if isinstance(x, int) and k not in ("running", "waiting") else x)
                     for k, x in d.items()}
                v["running"] = max(0, d["running"] - 3)
                v["waiting"] = max(0, d["waiting"] - 1)
                v["kv"] = round(d["kv"] * 0.7, 4)
                if d.get("prefix"):
                    r, q, h = d["prefix"]
                    v["prefix"] = (max(1, r // 2), q // 2, h // 3)
            if SCENARIO == "dp2-spec" and d.get("spec"):
                # each engine its own drafts and its own acceptance (engine 1: 60 % of the drafts)
                drafts = d["spec"][0] if e == 0 else int(d["spec"][0] * 0.6)
                v["spec"] = spec(drafts, DP_SPEC_PATTERNS[e])
            res[e] = v
        return res

    spec_k = 3 if SPEC else None

    def spec(drafts, pattern):
        if not spec_k:
            return None
        acc_list = [pattern[i % len(pattern)] for i in range(drafts)]
        return (drafts, acc_list, spec_k)

    plan = [
        (10.0, dict(prompt=4128, gen=312, running=3, waiting=0, kv=0.0213, prefix=(3, 4128, 0),
                    spec=spec(96, [3, 2, 0, 1])), acc(0)),
        (10.0, dict(prompt=0, gen=1187, running=3, waiting=0, kv=0.0342, spec=spec(380, [3, 3, 2, 0, 1])),
         acc(1) + [(41299, "GET", "/metrics", 200)]),
        (10.0, dict(prompt=24512, gen=2034, running=32, waiting=5, kv=0.6143, prefix=(40, 30016, 5504),
                    spec=spec(610, [2, 3, 1, 3, 0])), acc(2)),
        (10.0, dict(prompt=8190, gen=3011, running=48, waiting=12, kv=0.9981, preempted=2,
                    spec=spec(900, [3, 3, 3, 2, 1, 0])), acc(3) + [(41351, "POST", "/v1/chat/completions", 400)]),
        (10.0, dict(prompt=0, gen=850, running=1, waiting=0, kv=0.0517, spec=None), acc(6)),
        (10.0, dict(prompt=0, gen=0, running=0, waiting=0, kv=0.0, spec=None), acc(1)),
        (10.0, dict(prompt=0, gen=0, running=0, waiting=0, kv=0.0, spec=None), [(41377, "GET", "/health", 200)]),
        (10.0, dict(prompt=1021, gen=96, running=1, waiting=0, kv=0.0125, prefix=(1, 1024, 1008),
                    spec=spec(30, [3, 2])), []),
    ]
    if SCENARIO == "overload":
        # Arrivals outrun the engine for a minute: the KV cache stays full, generation stays flat at what the
        # engine can do, and the queue grows every interval until the burst stops; then it drains.
        plan = [
            (10.0, dict(prompt=20480, gen=9800, running=40, waiting=0, kv=0.612, prefix=(40, 20480, 2048),
                        spec=None), acc(6)),
        ]
        for waiting, kv, gen in ((4, 0.955, 20150), (11, 0.982, 20410), (19, 0.991, 20020), (27, 0.994, 19870),
                                 (38, 0.997, 20260), (46, 0.998, 20090)):
            plan.append((10.0, dict(prompt=6144, gen=gen, running=64, waiting=waiting, kv=kv, preempted=1,
                                    prefix=(64, 6144, 1536), spec=None), acc(5)))
        plan.append((10.0, dict(prompt=2048, gen=14800, running=48, waiting=9, kv=0.871, prefix=(20, 2048, 512),
                                spec=None), acc(14)))
        plan.append((10.0, dict(prompt=0, gen=6020, running=12, waiting=0, kv=0.322, spec=None), acc(30)))
    if SCENARIO == "spec":
        # served with --no-enable-prefix-caching: no prefix-cache queries are ever recorded
        for _, d, _ in plan:
            d.pop("prefix", None)
    if SCENARIO == "dp2-skew":
        # Balanced for 20 s, then every request goes to engine 0 for 40 s (its queue: 6, 14, 22, 9) while engine 1
        # runs nothing, then balanced again.
        def load(**k):
            return dict(dict(prompt=0, gen=0, running=0, waiting=0, kv=0.0, spec=None), **k)

        skew = [
            (load(prompt=8192, gen=1530, running=12, kv=0.2113), load(prompt=7680, gen=1490, running=11, kv=0.1987),
             acc(4)),
            (load(prompt=6144, gen=1710, running=13, kv=0.2405), load(prompt=6656, gen=1650, running=12, kv=0.2291),
             acc(5)),
            (load(prompt=16384, gen=2450, running=48, waiting=6, kv=0.8127), load(), acc(7)),
            (load(prompt=12288, gen=2610, running=48, waiting=14, kv=0.9302), load(), acc(8)),
            (load(prompt=10240, gen=2580, running=48, waiting=22, kv=0.9714, preempted=1), load(), acc(8)),
            (load(prompt=14336, gen=2700, running=48, waiting=9, kv=0.9455), load(), acc(6)),
            (load(prompt=4096, gen=2200, running=24, kv=0.5121), load(prompt=5120, gen=1100, running=20, kv=0.3342),
             acc(3)),
            (load(gen=640, running=2, kv=0.0311), load(gen=410, running=1, kv=0.0207), acc(2)),
        ]
        for d0, d1, accesses in skew:
            run.interval(10.0, {0: d0, 1: d1}, accesses)
        return
    for i, (secs, d, accesses) in enumerate(plan):
        if i == 3 and SCENARIO in ("single", "single-nocolor", "spec"):
            # a client sends an unknown field: a WARNING in the API server
            switch(API)
            IGNORED(data={"model": MODEL, "messages": [], "top_k_custom": 3}, extra_keys={"top_k_custom"},
                    field_names={"model", "messages"}, removed={"guided_json"})
        run.interval(secs, spread(d), accesses)


# ------------------------------------------------------------------ pd-nixl
PD_DECODE_RATE = 40.0  # tokens/s each request generates on the decode server
PD_NUM_GPU_BLOCKS = 26638  # vllm_config().cache_config.num_gpu_blocks


def kv_row(k: dict, stats_row: dict) -> dict:
    """What the "KV Transfer metrics" line after `stats_row` must say, computed here from the transfers fed (exact
    values; the line prints them rounded). vLLM's "MB" is MiB (bytes / 2**20); "Throughput (MB/s)" is the
    interval's MiB over the sum of its transfers' durations, not over wall time."""
    from fractions import Fraction as F
    from math import floor

    ok = k["transfers"]
    n = len(ok)
    row = {
        "kind": "kv_transfer",
        "time_epoch": stats_row["time_epoch"],
        "time_iso": stats_row["time_iso"],
        "time_printed": stats_row["time_printed"],
        "engine": stats_row["engine"],
        "connector": "NixlConnector",
        "stats_class": f"{NixlKVConnectorStats.__module__}.NixlKVConnectorStats",
        "num_successful_transfers": n,
        # NIXL's count of failed transfers (0.33 adds failed handshakes and notifications: none here)
        "num_failed_transfers": len(k["failed"]),
        "num_kv_expired_reqs": len(k["expired"]),
        "num_notifs_after_expiry": 0,
        # 0.15.1's reduce() writes no failure or expiry key at all; 0.33's writes all three on every line
        "failures_printed": NEW,
    }
    if n:
        xfer = sorted(F(t["xfer_us"], 10**6) for t in ok)
        post = sorted(F(t["post_us"], 10**6) for t in ok)
        mb = [F(t["bytes"], 2**20) for t in ok]

        def p90(a):  # numpy.percentile(a, 90), linear interpolation between the closest ranks
            pos = F(9, 10) * (len(a) - 1)
            lo = floor(pos)
            hi = min(lo + 1, len(a) - 1)
            return a[lo] + (a[hi] - a[lo]) * (pos - lo)

        row.update({
            "avg_xfer_time_ms": float(sum(xfer) / n * 1000),
            "p90_xfer_time_ms": float(p90(xfer) * 1000),
            "avg_post_time_ms": float(sum(post) / n * 1000),
            "p90_post_time_ms": float(p90(post) * 1000),
            "avg_mb_per_transfer": float(sum(mb) / n),
            "throughput_mb_s": float(sum(mb) / sum(xfer)),
            "avg_num_descriptors": float(F(sum(t["descriptors"] for t in ok), n)),
            "total_bytes": sum(t["bytes"] for t in ok),
        })
    else:
        # no successful transfer: the line prints every timing and size as 0 (no value, not a zero)
        row.update({key: None for key in ("avg_xfer_time_ms", "p90_xfer_time_ms", "avg_post_time_ms",
                                          "p90_post_time_ms", "avg_mb_per_transfer", "throughput_mb_s",
                                          "avg_num_descriptors")})
        row["total_bytes"] = 0
    row["transfers"] = ok
    row["failed"] = k["failed"]
    row["expired"] = k["expired"]
    return row


def kv_expected_text(r: dict) -> str:
    """The message the row must be printed as, built here from the row's values: keys in reduce()'s order,
    `{k}={v}` of a Python int or of a float rounded to 3 (descriptors: 1) decimals."""
    n = r["num_successful_transfers"]
    parts = [("Num successful transfers", n)]
    for key, field, d in (("Avg xfer time (ms)", "avg_xfer_time_ms", 3), ("P90 xfer time (ms)", "p90_xfer_time_ms", 3),
                          ("Avg post time (ms)", "avg_post_time_ms", 3), ("P90 post time (ms)", "p90_post_time_ms", 3),
                          ("Avg MB per transfer", "avg_mb_per_transfer", 3),
                          ("Throughput (MB/s)", "throughput_mb_s", 3),
                          ("Avg number of descriptors", "avg_num_descriptors", 1)):
        parts.append((key, round(r[field], d) if n else 0))
    if r["failures_printed"]:
        parts += [("Num failed transfers", r["num_failed_transfers"]), ("Num KV expired reqs", r["num_kv_expired_reqs"]),
                  ("Num notifs after expiry", r["num_notifs_after_expiry"])]
    return ", ".join(f"{k}={v}" for k, v in parts)


class FakeNixlAgent:
    """The calls of nixl._api.nixl_agent the worker polls with (no NIXL library, no GPU here): each read handle
    has the state and telemetry (nixlXferTelemetry: microseconds, bytes, descriptors) chosen for it."""

    def __init__(self):
        self.handles = {}

    def check_xfer_state(self, handle):
        return self.handles[handle][0]

    def get_xfer_telemetry(self, handle):
        return self.handles[handle][1]

    def release_xfer_handle(self, handle):
        del self.handles[handle]


def nixl_worker():
    """The installed release's NIXL worker class (0.15: NixlConnectorWorker, 0.33: NixlPullConnectorWorker) with
    the state its polling and stats methods use; its __init__ (CUDA, the NIXL agent, the side channel) is not run."""
    w = object.__new__(NixlWorker)
    w.nixl_wrapper = FakeNixlAgent()
    w.xfer_stats = NixlKVConnectorStats()
    w.engine_id = PD_ENGINE_IDS[PD_ROLE]
    w._recving_metadata = {}
    w._invalid_block_ids = set()
    w._failed_remote_engines = set()
    w._reqs_to_send = {}
    w._reqs_to_process = set()
    w.consumer_notification_counts_by_req = {}
    w.expected_consumer_notifications_by_req = {}
    # what its shutdown() (run by __del__) releases: nothing was registered
    w._handshake_initiation_executor = common.ns(shutdown=lambda wait=True: None)
    w._recving_transfers = {}
    w.src_xfer_handles_by_block_size, w.src_xfer_handles_by_tp_ratio = {}, {}
    w._dram_src_handles_by_block_size, w._dram_src_handles_by_tp_ratio = {}, {}
    w.dst_xfer_side_handles, w._remote_agents, w._registered_descs = {}, {}, []
    return w


def stats_payload(w):
    # NixlConnectorWorker.get_kv_connector_stats() (clone_and_reset of a non-empty xfer_stats), carried to the
    # scheduler in KVConnectorOutput; Scheduler.make_stats puts it in SchedulerStats as 0.15's `.data` /
    # 0.33's `.to_dict()`
    st = w.get_kv_connector_stats()
    if st is None:
        return None
    return st.to_dict() if NEW else st.data


def pd_plan():
    """Per interval and step, what the server's scheduler reports (and the requests' events), worked out from
    PD_REQUESTS alone. Global step g = 5 * interval + step; it runs at T0 + 2 * (g + 1) s."""
    reqs = [dict(r, idx=i, blocks=pd_blocks(r), ok=r["xfer_us"] is not None) for i, r in enumerate(PD_REQUESTS)]
    for r in reqs:
        r["g_prefill"] = 5 * r["interval"] + r["prefill_step"]
        r["g_read"] = 5 * r["interval"] + r["read_step"]
    for r in reqs:
        # the prefill server's blocks are freed by the decode's read notification, or expire PD_EXPIRY_S after
        # the prefill; the expiry is found at the first engine step after it (an idle engine runs none)
        if not r["ok"]:
            due = 2 * (r["g_prefill"] + 1) + PD_EXPIRY_S
            r["g_expired"] = min(x["g_prefill"] for x in reqs if 2 * (x["g_prefill"] + 1) >= due)
    # the decode server: 0.15 recomputes the prompt of a failed read (kv_load_failure_policy "recompute", its
    # default) and decodes it; 0.33 fails the request ("fail", its default)
    decodes = [r for r in reqs if r["ok"] or not NEW]

    def tokens(r, t):  # tokens the decode server has generated for r by time t (the first at its read step)
        t0 = 2 * (r["g_read"] + 1)
        if r not in decodes or t < t0:
            return 0
        return min(r["max_tokens"], 1 + int(PD_DECODE_RATE * (t - t0)))

    steps = {}
    for i in range(PD_INTERVALS):
        for k in range(4):
            g = 5 * i + k
            t, t_prev = 2 * (g + 1), (2 * g if k else 2 * (g - 1))  # the previous recorded step
            w = dict(prompt=0, prompt_total=None, gen=0, running=0, waiting=0, kv=0.0, prefix=None, ext_prefix=None)
            arrive = [r for r in reqs if r["g_prefill"] == g]
            if PD_ROLE == "prefill":
                if arrive:
                    n, q = len(arrive), sum(r["prompt"] for r in arrive)
                    w.update(prompt=q, gen=n, prefix=(n, q, 0), ext_prefix=(n, q, 0))
                held = sum(r["blocks"] for r in reqs if r["g_prefill"] <= g and (
                    (r["ok"] and r["g_read"] > g) or (not r["ok"] and r["g_expired"] > g)))
                w["kv"] = held / PD_NUM_GPU_BLOCKS
            else:
                if arrive:
                    n, q = len(arrive), sum(r["prompt"] for r in arrive)
                    w.update(prefix=(n, q, 0), ext_prefix=(n, q, q))
                first = [r for r in decodes if r["g_read"] == g]
                if NEW:  # computed prompt tokens: the last prompt token, recomputed after the read (or the
                    # whole prompt of a recomputed failure; none in 0.33)
                    w["prompt"] = sum(1 if r["ok"] else r["prompt"] for r in first)
                    w["prompt_total"] = sum(r["prompt"] for r in first)
                else:
                    w["prompt"] = sum(r["prompt"] for r in first)
                w["gen"] = sum(tokens(r, t) - tokens(r, t_prev) for r in decodes)
                run = [r for r in decodes if 0 < tokens(r, t) < r["max_tokens"]]
                w["running"] = len(run)
                w["kv"] = sum(-(-(r["prompt"] + tokens(r, t)) // PD_BLOCK_SIZE) for r in run) / PD_NUM_GPU_BLOCKS
                # waiting for their KV (WAITING_FOR_REMOTE_KVS) at the step's end: none at these steps
                w["waiting"] = sum(1 for r in reqs if r["g_prefill"] <= g < r["g_read"])
            steps[g] = w
    return reqs, steps, tokens


def pd_traffic(mgr, created_mono):
    run = StatsRun(mgr, [0], created_mono)
    reqs, steps, tokens = pd_plan()
    T0 = clock.t  # the traffic's start: interval i runs from T0 + 10 i
    W = nixl_worker()
    rows = {r["request"]: {"request": r["request"], "request_id": pd_request_id(r)} for r in reqs}

    def at(g):
        return T0 + 2 * (g + 1)

    def hook_for(i):
        def hook(k):
            g = 5 * i + k
            assert abs(clock.t - at(g)) < 1e-6
            for r in reqs:
                if r["g_prefill"] == g:
                    # the proxy's POST: to the prefill server (max_tokens=1), then to the decode server
                    access(51712 + 2 * (r["idx"] % 2) + (0 if PD_ROLE == "prefill" else 12), "POST",
                           "/v1/completions", 200)
                    rows[r["request"]]["arrived_epoch" if PD_ROLE == "decode" else "prefill_epoch"] = round(clock.t, 3)
            if PD_ROLE == "prefill":
                for r in reqs:
                    if r["g_prefill"] == g:
                        rows[r["request"]].update(kv_blocks=r["blocks"], kv_bytes=r["blocks"] * PD_BLOCK_SIZE *
                                                  PD_KV_BYTES_PER_TOKEN)
                        # request_finished on the prefill server: the blocks wait for the decode's read
                        W._reqs_to_send[pd_request_id(r)] = clock.mono() + PD_EXPIRY_S
                        W._reqs_to_process.add(pd_request_id(r))
                    if r["ok"] and r["g_read"] == g:  # the decode's read notification frees them
                        W._reqs_to_send.pop(pd_request_id(r), None)
                        W._reqs_to_process.discard(pd_request_id(r))
                        rows[r["request"]]["kv_released"] = "read by the decode server"
                expired = [r for r in reqs if not r["ok"] and r["g_expired"] == g]
                if expired:
                    switch(ENGINES[0])  # the worker runs in the engine core process (TP 1)
                    for r in expired:
                        truth_lines.append({"kind": "kv_expired", "level": "WARNING", "request": r["request"],
                                            "request_id": pd_request_id(r), "time_epoch": round(clock.t, 3),
                                            "time_iso": common.iso(clock.t)})
                    if NEW:
                        W._reap_expired_send_leases(set())  # records record_kv_expired_req and warns
                    else:  # inline in NixlConnectorWorker.get_finished: record, then the warning
                        for r in expired:
                            W.xfer_stats.record_kv_expired_req()
                            EXPIRED_WARNING(req_id=pd_request_id(r), count=0, envs=vllm_envs)
                            W._reqs_to_send.pop(pd_request_id(r))
                    switch(API)
                    for r in expired:
                        rows[r["request"]].update(kv_released="expired", kv_expired_epoch=round(clock.t, 3))
            else:
                reads = [r for r in reqs if r["g_read"] == g]
                if reads:
                    switch(ENGINES[0])
                    for r in reads:
                        rid, handle = pd_request_id(r), 7001 + r["idx"]
                        local = list(range(1100 + 100 * r["idx"], 1100 + 100 * r["idx"] + r["blocks"]))
                        remote = list(range(2300 + 100 * r["idx"], 2300 + 100 * r["idx"] + r["blocks"]))
                        W._recving_metadata[rid] = common.ns(
                            local_block_ids=[local] if NEW else local,
                            remote=common.ns(engine_id=PD_ENGINE_IDS["prefill"], request_id=rid, host="localhost",
                                             port=5600, block_ids=[remote] if NEW else remote))
                        nbytes = r["blocks"] * PD_BLOCK_SIZE * PD_KV_BYTES_PER_TOKEN
                        tel = common.ns(startTime=int(clock.t * 1e6) - (r["xfer_us"] or 0),
                                        postDuration=r["post_us"], xferDuration=r["xfer_us"], totalBytes=nbytes,
                                        descCount=r["blocks"] * PD_DESCS_PER_BLOCK)
                        W.nixl_wrapper.handles[handle] = ("DONE", tel) if r["ok"] else ("ERR", None)
                        if not r["ok"]:
                            truth_lines.append({"kind": "nixl_transfer_failure", "level": "ERROR",
                                                "request": r["request"], "request_id": rid,
                                                "time_epoch": round(clock.t, 3), "time_iso": common.iso(clock.t)})
                        W._pop_done_transfers({rid: [handle]})  # records the transfer / logs and records the failure
                        W._recving_metadata.pop(rid)  # get_finished's clean-up
                        rows[r["request"]].update(read_done_epoch=round(clock.t, 3), read="ok" if r["ok"] else "failed")
                        if r["ok"]:
                            rows[r["request"]].update(xfer_ms=r["xfer_us"] / 1000, post_ms=r["post_us"] / 1000,
                                                      bytes=nbytes, descriptors=r["blocks"] * PD_DESCS_PER_BLOCK)
                        else:
                            rows[r["request"]]["after_failure"] = (
                                "the request failed (kv_load_failure_policy 'fail', 0.33's default)" if NEW else
                                "its prompt recomputed on the decode server (kv_load_failure_policy 'recompute', "
                                "0.15's default)")
                    switch(API)
            return stats_payload(W)
        return hook

    for i in range(PD_INTERVALS):
        per_step = [steps[5 * i + k] for k in range(4)]
        gs = range(5 * i, 5 * i + 4)

        def tot(key):
            xs = [w[key] for w in per_step if w[key]]
            return tuple(map(sum, zip(*xs))) if xs else None

        v = dict(prompt=sum(w["prompt"] for w in per_step), gen=sum(w["gen"] for w in per_step),
                 running=per_step[-1]["running"], waiting=per_step[-1]["waiting"], kv=per_step[-1]["kv"],
                 prefix=tot("prefix"), ext_prefix=tot("ext_prefix"), steps=per_step)
        k = {"transfers": [], "failed": [], "expired": []}
        for r in reqs:
            if PD_ROLE == "decode" and r["g_read"] in gs:
                if r["ok"]:
                    k["transfers"].append({"request": r["request"], "xfer_us": r["xfer_us"], "post_us": r["post_us"],
                                           "bytes": r["blocks"] * PD_BLOCK_SIZE * PD_KV_BYTES_PER_TOKEN,
                                           "descriptors": r["blocks"] * PD_DESCS_PER_BLOCK,
                                           "done_epoch": round(at(r["g_read"]), 3)})
                else:
                    k["failed"].append({"request": r["request"], "done_epoch": round(at(r["g_read"]), 3)})
            if PD_ROLE == "prefill" and not r["ok"] and r["g_expired"] in gs:
                k["expired"].append({"request": r["request"], "expired_epoch": round(at(r["g_expired"]), 3)})
        if k["transfers"] or k["failed"] or k["expired"]:
            v["kv_expected"] = k  # else the accumulator stays empty: no line (KVConnectorLogging.log)
        run.interval(10.0, {0: v}, (), hook=hook_for(i))
    if PD_ROLE == "decode":
        for r in reqs:
            rows[r["request"]]["generated_tokens"] = tokens(r, 10 ** 9)
    return list(rows.values())


def main():
    global API
    if SCENARIO == "dp2-default":
        # run_multi_api_server: the launching process is never decorated
        switch(MAIN)
        DEFAULT_API_COUNT(args=common.ns(api_server_count=2))
        version_and_args(logging.getLogger("vllm.entrypoints.cli.serve" if NEW else "vllm.entrypoints.openai.api_server"))
        engines = [0, 1]
        for e in engines:
            mp = f"EngineCore_DP{e}"
            engine_startup(ENGINES[e], mp, e)
        for i, w in enumerate(API_WORKERS):
            w.mp_name = f"ApiServer_{i}"  # v1/utils.py: Process(name=f"ApiServer_{i}")
            switch(w)
            system_utils.decorate_logs()  # run_api_server_worker_proc: decorate_logs()
            save_decoration(w)
            # AsyncLLM(client_count=2) -> StatLoggerManager(..., client_count=2): the warning
            make_manager(engines, aggregate=False, client_count=2)
            truth_lines.append({"kind": "warning", "process": f"ApiServer_{i}",
                                "text": "AsyncLLM created with api_server_count more than 1; disabling stats logging to avoid incomplete stats."})
        for i, w in enumerate(API_WORKERS):
            API = w
            api_ready(rank=i)
        for w, port in ((API_WORKERS[0], 51000), (API_WORKERS[1], 51001), (API_WORKERS[0], 51002)):
            clock.advance(3.3)
            switch(w)
            access(port, "POST", "/v1/chat/completions", 200)
        return

    if PD_ROLE:
        api_startup()
        engine_startup(ENGINES[0], "EngineCore" if NEW else "EngineCore_DP0", None)
        switch(API)
        mgr = make_manager([0], aggregate=False, client_count=1)
        created = clock.mono()
        api_ready(listen=f"http://0.0.0.0:{PD_PORTS[PD_ROLE]}")
        clock.advance(0.8)
        switch(API)
        return pd_traffic(mgr, created)

    api_startup()
    engines = [0, 1] if SCENARIO.startswith("dp2") else [0]
    for e in engines:
        if NEW:
            mp = f"EngineCore_DP{e}" if SCENARIO.startswith("dp2") else "EngineCore"
        else:
            mp = f"EngineCore_DP{e}"  # 0.15: v1/engine/utils.py names every engine process EngineCore_DP<i>
        engine_startup(ENGINES[e], mp, e if SCENARIO.startswith("dp2") else None)
    switch(API)
    mgr = make_manager(engines, aggregate=(SCENARIO == "dp2-agg"), client_count=1)
    created = clock.mono()
    api_ready()
    clock.advance(0.8)
    switch(API)
    CHAT_FMT(detected_format="string")
    traffic(engines, mgr, created)


STATS_RE = re.compile(
    r"^(?:(?:\x1b\[0;36m)?\((?P<proc>\w+) pid=(?P<pid>\d+)\)(?:\x1b\[0;0m)? )?"
    r"(?P<level>INFO|DEBUG) (?P<ts>\d\d-\d\d \d\d:\d\d:\d\d) \[(?P<file>[\w.]+):(?P<lineno>\d+)\] "
    r"(?:Engine (?P<eng>\d{3}): |(?P<n>\d+) Engines Aggregated: )"
    r"Avg prompt throughput: (?P<pt>[\d.]+) tokens/s, Avg generation throughput: (?P<gt>[\d.]+) tokens/s, "
    r"Running: (?P<run>\d+) reqs, Waiting: (?P<wait>\d+) reqs(?:, Preemptions: (?P<pre>\d+))?, "
    r"(?P<dev>\w+) KV cache usage: (?P<kv>[\d.]+)%(?:, Prefix cache hit rate: (?P<hit>[\d.]+)%)?"
    r"(?:, External prefix cache hit rate: (?P<ext>[\d.]+)%)?$")
SPEC_RE = re.compile(
    r"\] SpecDecoding metrics: Mean acceptance length: (?P<mal>[\d.]+), "
    r"Accepted throughput: (?P<at>[\d.]+) tokens/s, Drafted throughput: (?P<dt>[\d.]+) tokens/s, "
    r"Accepted: (?P<acc>\d+) tokens, Drafted: (?P<dr>\d+) tokens, "
    r"Per-position acceptance rate: (?P<pp>[\d., ]+), Avg Draft acceptance rate: (?P<rate>[\d.]+)%$")


def attach_and_check(text: str) -> None:
    """Give every emitted stats/spec truth row the 1-based line of the log that printed it,
    and check the printed numbers against the values passed (formatted as vLLM does)."""
    lines = text.split("\n")
    stats_at = [i for i, ln in enumerate(lines) if "Avg prompt throughput" in ln]
    spec_at = [i for i, ln in enumerate(lines) if "SpecDecoding metrics:" in ln]
    want_stats = [r for r in truth_lines if r["kind"] == "stats" and r["emitted"]]
    want_spec = [r for r in truth_lines if r["kind"] == "spec"]
    assert len(stats_at) == len(want_stats), (len(stats_at), len(want_stats))
    assert len(spec_at) == len(want_spec), (len(spec_at), len(want_spec))
    for i, r in zip(stats_at, want_stats):
        m = STATS_RE.match(lines[i])
        assert m, repr(lines[i])
        r["log_line"] = i + 1
        got = m.groupdict()
        exp = {
            "ts": r["time_printed"], "pt": f"{r['prompt_throughput']:.1f}", "gt": f"{r['generation_throughput']:.1f}",
            "run": str(r["running"]), "wait": str(r["waiting"]),
            # LoggingStatLogger.log() calls _update_stats() -> _reset() (num_preemptions = 0)
            # before it tests `if self.num_preemptions > 0`: the part is never printed.
            "pre": None,
            "kv": f"{r['kv_cache_usage'] * 100:.1f}",
            "hit": f"{r['prefix_cache_hit_rate'] * 100:.1f}" if r["prefix_cache_hit_rate_printed"] else None,
            "eng": f"{r['engine']:03d}" if r["engine"] is not None else None,
            "n": str(r["aggregated_engines"]) if r["aggregated_engines"] else None,
            "ext": (f"{r['external_prefix_cache_hit_rate'] * 100:.1f}"
                    if r.get("external_prefix_cache_hit_rate_printed") else None),
        }
        for k, v in exp.items():
            assert got[k] == v, (k, got[k], v, lines[i])
    access_at = [i for i, ln in enumerate(lines) if ' HTTP/1.1" ' in ln]
    want_access = [r for r in truth_lines if r["kind"] == "access"]
    assert len(access_at) == len(want_access), (len(access_at), len(want_access))
    for i, r in zip(access_at, want_access):
        assert f'"{r["method"]} {r["path"]} HTTP/1.1" {r["status"]} ' in lines[i], lines[i]
        r["log_line"] = i + 1
    for i, r in zip(spec_at, want_spec):
        m = SPEC_RE.search(lines[i])
        assert m, repr(lines[i])
        r["log_line"] = i + 1
        got = m.groupdict()
        exp = {
            "mal": f"{r['mean_acceptance_length']:.2f}", "at": f"{r['accepted_throughput']:.2f}",
            "dt": f"{r['drafted_throughput']:.2f}", "acc": str(r["accepted_tokens"]), "dr": str(r["draft_tokens"]),
            "pp": ", ".join(f"{p:.3f}" for p in r["per_position_acceptance_rate"]),
            "rate": f"{r['draft_acceptance_rate'] * 100:.1f}",
        }
        for k, v in exp.items():
            assert got[k] == v, (k, got[k], v, lines[i])
        # The SpecDecoding line names no engine: it must come right after its own engine's stats line,
        # printed in the same second.
        prev = max(j for j in stats_at if j < i)
        assert prev == i - 1, (prev, i)
        m = STATS_RE.match(lines[prev])
        want_eng = f"{r['engine']:03d}" if r["engine"] is not None else None
        assert m["eng"] == want_eng and m["ts"] == r["time_printed"], (lines[prev], r)
    kv_at = [i for i, ln in enumerate(lines) if "KV Transfer metrics: " in ln]
    want_kv = [r for r in truth_lines if r["kind"] == "kv_transfer" and r["emitted"]]
    assert len(kv_at) == len(want_kv), (len(kv_at), len(want_kv))
    for i, r in zip(kv_at, want_kv):
        r["log_line"] = i + 1
        want = "] KV Transfer metrics: " + kv_expected_text(r)
        assert lines[i].endswith(want) and r["time_printed"] in lines[i], (lines[i], want)
        # written by KVConnectorLogging.log right after its engine's stats line (and SpecDecoding line, if any)
        prev = max(j for j in stats_at + spec_at if j < i)
        assert prev == i - 1, (prev, i)
        m = STATS_RE.match(lines[max(j for j in stats_at if j < i)])
        assert m["eng"] == f"{r['engine']:03d}" and m["ts"] == r["time_printed"], (lines[prev], r)
    for kind, needle in (("nixl_transfer_failure", "NIXL transfer failure: "),
                         ("kv_expired", "Releasing expired KV blocks for request ")):
        at = [i for i, ln in enumerate(lines) if needle in ln]
        want = [r for r in truth_lines if r["kind"] == kind]
        assert len(at) == len(want), (kind, len(at), len(want))
        for i, r in zip(at, want):
            assert r["request_id"] in lines[i], (lines[i], r)
            r["log_line"] = i + 1


pd_requests = main()
common.restore_stdio()
text = sink.text()
attach_and_check(text)
truth = {
    "engine": "vllm",
    "version": VERSION,
    "scenario": SCENARIO,
    "timezone": "UTC",
    "log_stats_interval_s": 10.0,
    "units": {
        "prompt_throughput": "tokens/s (prompt tokens of the interval / interval seconds; printed %.1f)",
        "generation_throughput": "tokens/s (generated tokens of the interval / interval seconds; printed %.1f)",
        "kv_cache_usage": "fraction 0..1 (printed as percent, %.1f%%)",
        "prefix_cache_hit_rate": "fraction 0..1 over the most recent <=1000 requests, cumulative (printed as percent)",
        "draft_acceptance_rate": "fraction 0..1 (printed as percent)",
    },
    "lines": truth_lines,
}
if PD_ROLE:
    truth["units"].update({
        "external_prefix_cache_hit_rate": "fraction 0..1, the connector's hits over its queries (tokens), cumulative "
                                          "over the most recent <=1000 requests (printed as percent)",
        "kv_transfer": "per KV Transfer metrics line, from the transfers the decode worker recorded since the "
                       "previous line: times in ms (NIXL telemetry, microseconds / 1000), MB = MiB (bytes / 2**20), "
                       "throughput_mb_s = the MiB over the sum of the transfers' durations (not wall time), "
                       "p90 = numpy.percentile(..., 90) (linear); exact values, the line prints them rounded "
                       "(3 decimals, descriptors 1); with no successful transfer they print as 0 (null here)",
    })
    truth["pair_truth"] = os.path.basename(OUT_BASE).rsplit("-", 1)[0] + ".truth.json"
    truth["server"] = {
        "command": f"vllm serve {MODEL} --port {PD_PORTS[PD_ROLE]} --kv-transfer-config "
                   f"'{{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"{KV_CFG.kv_role}\"}}'",
        "env": {"VLLM_NIXL_ABORT_REQUEST_TIMEOUT": str(PD_EXPIRY_S)} if PD_ROLE == "prefill" and not NEW else {},
        "kv_role": KV_CFG.kv_role, "engine_id": KV_CFG.engine_id, "kv_load_failure_policy": KV_CFG.kv_load_failure_policy,
        "connector_class": f"{NIXL_CONNECTOR.__module__}.{NIXL_CONNECTOR.__name__}",
        "worker_class": f"{NixlWorker.__module__}.{NixlWorker.__name__}",
        "stats_class": f"{NixlKVConnectorStats.__module__}.NixlKVConnectorStats",
        "pids": {"APIServer": API.pid, "EngineCore": ENGINES[0].pid},
    }
    truth["requests"] = pd_requests
common.write_outputs(OUT_BASE, text, truth)
print(f"{OUT_BASE}.log: {text.count(chr(10))} lines", file=sys.__stderr__)
