"""Load SGLang's tracing modules without torch, CUDA or the rest of the server.

What runs is SGLang's own code, imported from the installed wheel:

  sglang.srt.observability.trace           (real module, unchanged)
  sglang.srt.observability.req_time_stats  (real module, unchanged)
  sglang.srt.environ, sglang.srt.runtime_context, sglang.srt.utils.poll_timer
                                           (real modules; stdlib + msgspec only)

Some modules those import at the top pull in torch, triton, numpy, transformers
or the whole server configuration, and a few pieces the driver needs live in
such modules. Those are replaced in ``sys.modules`` before anything is imported:

  sglang                       package __init__ imports the frontend language
                               (sglang.lang), transformers patches and, on some
                               versions, torch. Replaced by an empty package whose
                               __path__ is the real one, so ``sglang.srt.*`` still
                               loads from the wheel.
  sglang.srt.utils             utils/__init__ star-imports utils/common.py (torch,
                               numpy, triton, psutil, ...). Replaced by a package
                               with the real __path__ (so utils.poll_timer loads
                               from the wheel) that holds get_int_env_var and
                               get_bool_env_var, compiled from utils/common.py.
  sglang.srt.model_executor.forward_batch_info
                               imports torch. Holds ForwardMode, compiled from the
                               wheel's own class source.
  sglang.srt.disaggregation.utils
                               imports torch and the KV-transfer stack. Holds
                               DisaggregationMode, compiled from the wheel's source.
  sglang.srt.managers.schedule_batch
                               imports torch (and the whole batch machinery).
                               TraceReqContext.abort() imports BaseFinishReason
                               from it; holds BaseFinishReason and the FINISH_*
                               classes the driver uses, compiled from the wheel.
  sglang.srt.observability.metrics_collector
                               imports server_args (torch) and prometheus. Only
                               its class names are used by req_time_stats (type
                               hints); metrics are off (no --enable-metrics), as in
                               a default server, so empty classes stand in.

"Compiled from the wheel's source" means: the class or function definition is cut
out of the installed file with ``ast`` and executed; no SGLang code is copied
into this repository. ``extract()`` does the same for tokenizer_manager methods
(``convert_to_span_attrs``, ``_get_scheduler_first_token_time``) that the driver
calls on a stand-in tokenizer manager.

For 0.5.3-0.5.9, whose tracing is ``sglang/srt/tracing/trace.py`` (a function API
keyed by rid), ``load_rid_api()`` does the same with a smaller set: ``sglang``,
``sglang.srt.utils`` (``get_int_env_var``, ``get_bool_env_var``) and
``sglang.srt.managers.schedule_batch`` (``FINISH_*`` and ``RequestStage``).
"""

from __future__ import annotations

import __future__
import ast
import enum
import importlib.util
import logging
import os
import sys
import types
import typing

_SGLANG_DIR: str | None = None


def sglang_dir() -> str:
    global _SGLANG_DIR
    if _SGLANG_DIR is None:
        spec = importlib.util.find_spec("sglang")
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit("sglang is not installed in this interpreter")
        _SGLANG_DIR = list(spec.submodule_search_locations)[0]
    return _SGLANG_DIR


def src(rel: str) -> str:
    """Path of a file inside the installed sglang package."""
    return os.path.join(sglang_dir(), rel)


def _base_globals(modname: str) -> dict:
    g = {
        "__name__": modname,
        "__builtins__": __builtins__,
        "os": os,
        "sys": sys,
        "logging": logging,
        "logger": logging.getLogger(modname),
        "Enum": enum.Enum,
        "IntEnum": enum.IntEnum,
        "auto": enum.auto,
    }
    for name in ("Any", "Dict", "List", "Optional", "Tuple", "Union", "Mapping"):
        g[name] = getattr(typing, name)
    return g


def extract(rel: str, qualname: str, globs: dict | None = None, modname: str = "extracted"):
    """Compile one top-level definition (``Name``) or one method (``Class.method``)
    from an installed sglang file and return the resulting object.

    Decorators are dropped (``@staticmethod`` on a method cut out of its class is
    meaningless); ``from __future__ import annotations`` is applied so that type
    hints are never evaluated.
    """
    path = src(rel)
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    parts = qualname.split(".")
    body = tree.body
    node = None
    for i, part in enumerate(parts):
        node = next(
            (
                n
                for n in body
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and n.name == part
            ),
            None,
        )
        if node is None:
            raise LookupError(f"{qualname} not found in {path}")
        body = node.body
    if not isinstance(node, ast.ClassDef):
        node.decorator_list = []
    module = ast.Module(body=[node], type_ignores=[])
    code = compile(
        module, path, "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True
    )
    g = _base_globals(modname)
    if globs:
        g.update(globs)
    exec(code, g)
    return g[parts[-1]]


def _package(name: str, path: str | None) -> types.ModuleType:
    m = types.ModuleType(name)
    if path is not None:
        m.__path__ = [path]
    m.__file__ = os.path.join(path, "__init__.py") if path else None
    m.__tokenscope_stub__ = True
    sys.modules[name] = m
    return m


def install() -> None:
    """Put the stand-ins into sys.modules (idempotent)."""
    if "sglang" in sys.modules and getattr(sys.modules["sglang"], "__tokenscope_stub__", False):
        return
    root = sglang_dir()
    _package("sglang", root)

    utils = _package("sglang.srt.utils", os.path.join(root, "srt", "utils"))
    common = "srt/utils/common.py"
    extra = {"_warned_bool_env_var_keys": set()}
    utils.get_int_env_var = extract(common, "get_int_env_var", extra, "sglang.srt.utils")
    utils.get_bool_env_var = extract(common, "get_bool_env_var", extra, "sglang.srt.utils")

    fbi = _package("sglang.srt.model_executor.forward_batch_info", None)
    fbi.ForwardMode = extract(
        "srt/model_executor/forward_batch_info.py",
        "ForwardMode",
        modname="sglang.srt.model_executor.forward_batch_info",
    )

    dutils = _package("sglang.srt.disaggregation.utils", None)
    dutils.DisaggregationMode = extract(
        "srt/disaggregation/utils.py",
        "DisaggregationMode",
        modname="sglang.srt.disaggregation.utils",
    )

    # trace.TraceReqContext.abort(abort_info=...) imports BaseFinishReason from
    # here; the finish reasons the driver reports come from the same classes.
    sb = _package("sglang.srt.managers.schedule_batch", None)
    g = {}
    for cls in ("BaseFinishReason", "FINISH_MATCHED_TOKEN", "FINISH_LENGTH", "FINISH_ABORT"):
        obj = extract("srt/managers/schedule_batch.py", cls, g, "sglang.srt.managers.schedule_batch")
        g[cls] = obj
        setattr(sb, cls, obj)

    mc = _package("sglang.srt.observability.metrics_collector", None)
    for cls in ("SchedulerMetricsCollector", "TokenizerMetricsCollector", "EncoderMetricsCollector"):
        setattr(mc, cls, type(cls, (), {"__module__": mc.__name__}))


def load_rid_api():
    """For 0.5.3-0.5.9 (``sglang/srt/tracing/trace.py``, the function API keyed
    by rid): install the few stand-ins that module and the driver need, import it.

    trace.py itself needs only opentelemetry (0.5.9 also imports
    ``get_int_env_var`` from ``sglang.srt.utils``). The driver needs, from
    ``managers/schedule_batch.py`` (torch): the ``FINISH_*`` classes and the
    ``RequestStage`` enum, whose members 0.5.9's call sites pass as slice names
    (0.5.3 has the enum but its tracing calls use string literals). Both are compiled from the wheel's source as in ``install()``.

    Returns (trace, schedule_batch stand-in).
    """
    if not ("sglang" in sys.modules and getattr(sys.modules["sglang"], "__tokenscope_stub__", False)):
        root = sglang_dir()
        _package("sglang", root)
        utils = _package("sglang.srt.utils", os.path.join(root, "srt", "utils"))
        common = "srt/utils/common.py"
        extra = {"_warned_bool_env_var_keys": set()}
        utils.get_int_env_var = extract(common, "get_int_env_var", extra, "sglang.srt.utils")
        utils.get_bool_env_var = extract(common, "get_bool_env_var", extra, "sglang.srt.utils")
        sb = _package("sglang.srt.managers.schedule_batch", None)
        g = {"enum": enum}
        for cls in ("BaseFinishReason", "FINISH_MATCHED_TOKEN", "FINISH_LENGTH", "FINISH_ABORT",
                    "RequestStage"):
            try:
                obj = extract("srt/managers/schedule_batch.py", cls, g,
                              "sglang.srt.managers.schedule_batch")
            except LookupError:
                if cls == "RequestStage":  # not in every release (0.5.3 has it, unused by tracing)
                    continue
                raise
            g[cls] = obj
            setattr(sb, cls, obj)
    if not os.path.exists(src("srt/tracing/trace.py")):
        raise SystemExit("this sglang has no srt/tracing/trace.py (0.5.10+: use drive.py)")
    import sglang.srt.tracing.trace as trace_mod

    return trace_mod, sys.modules["sglang.srt.managers.schedule_batch"]


def load():
    """Install the stand-ins and import SGLang's tracing modules.

    Returns (trace, req_time_stats, ForwardMode, DisaggregationMode).
    """
    install()
    import sglang.srt.observability.trace as trace_mod
    import sglang.srt.observability.req_time_stats as rts

    forward_mode = sys.modules["sglang.srt.model_executor.forward_batch_info"].ForwardMode
    disagg_mode = sys.modules["sglang.srt.disaggregation.utils"].DisaggregationMode
    return trace_mod, rts, forward_mode, disagg_mode
