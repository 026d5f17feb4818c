"""Shared pieces of the engine-log drivers (vllm_log.py, sglang_log.py).

Nothing here formats a log line: every line in the fixtures is written by the
engine's own code (its logger calls, its formatter, its stream decoration) or by
uvicorn's / tqdm's own code. What this module provides is the harness around it:

  VirtualClock   time.time / time.monotonic / time.perf_counter (and the _ns
                 variants) read one settable clock, so throughputs (tokens over
                 elapsed seconds) and the printed timestamps are deterministic.
                 TZ is UTC, so asctime is the UTC wall time of the clock.
  Sink, Stream   a stand-in for a terminal/file: every process of the simulated
                 server writes its stdout and stderr into one ordered sink, as
                 `vllm serve ... > server.log 2>&1` or `docker logs` would show.
  Proc           a simulated OS process: its pid (os.getpid is patched to return
                 it while the process is current) and its own stdout/stderr.
  SourceCall     re-issues one logger call of an installed file: the call is
                 found with `ast` by a needle (a piece of its format string), its
                 argument expressions are evaluated exactly as written in the
                 source (against values the driver supplies for the names they
                 use), and the logger method is invoked from a code object whose
                 file name and line number are those of the call in the
                 installed file, so %(filename)s / %(lineno)d are the real ones.
"""

from __future__ import annotations

import ast
import builtins
import json
import logging
import os
import sys
import time
import types

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "debug_once": logging.DEBUG,
    "info_once": logging.INFO,
    "warning_once": logging.WARNING,
    "error_once": logging.ERROR,
    "exception": logging.ERROR,
}


class VirtualClock:
    MONO_BASE = 4242.0  # monotonic/perf_counter value at epoch `start` (arbitrary, like a host uptime)

    def __init__(self, start_epoch: float):
        self.start = start_epoch
        self.t = start_epoch

    def advance(self, seconds: float) -> None:
        assert seconds >= 0
        self.t += seconds

    def set(self, epoch: float) -> None:
        assert epoch >= self.t
        self.t = epoch

    def mono(self) -> float:
        return self.MONO_BASE + (self.t - self.start)

    def install(self) -> None:
        os.environ["TZ"] = "UTC"
        time.tzset()
        time.time = lambda: self.t
        time.time_ns = lambda: int(round(self.t * 1e9))
        time.monotonic = self.mono
        time.monotonic_ns = lambda: int(round(self.mono() * 1e9))
        time.perf_counter = self.mono
        time.perf_counter_ns = lambda: int(round(self.mono() * 1e9))


class Sink:
    def __init__(self):
        self.chunks: list[str] = []

    def text(self) -> str:
        return "".join(self.chunks)

    def clear(self) -> None:
        self.chunks.clear()


class Stream:
    """A non-tty text stream into the sink (attributes can be set on it, as vLLM's
    _add_prefix does on sys.stdout/sys.stderr)."""

    encoding = "utf-8"
    errors = "strict"

    def __init__(self, sink: Sink, name: str):
        self._sink = sink
        self.name = name

    def write(self, s: str) -> int:
        self._sink.chunks.append(s)
        return len(s)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True


def _excepthook(tp, val, tb):
    import traceback

    traceback.print_exception(tp, val, tb, file=sys.__stderr__)


sys.excepthook = _excepthook  # tracebacks must not land in the simulated server's streams

_CURRENT_PID = [os.getpid()]
_REAL_GETPID = os.getpid


def _fake_getpid() -> int:
    return _CURRENT_PID[0]


class Proc:
    """A simulated server process: pid plus its own stdout/stderr."""

    current: "Proc | None" = None

    def __init__(self, sink: Sink, name: str, pid: int):
        self.name = name
        self.pid = pid
        self.stdout = Stream(sink, f"{name}.stdout")
        self.stderr = Stream(sink, f"{name}.stderr")

    def enter(self) -> "Proc":
        os.getpid = _fake_getpid
        _CURRENT_PID[0] = self.pid
        sys.stdout = self.stdout
        sys.stderr = self.stderr
        Proc.current = self
        return self


def restore_stdio() -> None:
    sys.stdout = sys.__stdout__
    sys.stderr = sys.__stderr__


# ---------------------------------------------------------------- source calls

_TREES: dict[str, ast.Module] = {}


def _tree(path: str) -> tuple[ast.Module, list[str]]:
    if path not in _TREES:
        with open(path, encoding="utf-8") as f:
            _TREES[path] = (ast.parse(f.read(), path), open(path, encoding="utf-8").read().splitlines())
    return _TREES[path]


class SourceCallNotFound(LookupError):
    pass


def find_log_call(path: str, needle: str, occurrence: int = 0) -> ast.Call:
    """The logger call (x.info(...), logger.warning_once(...), log_fn(...)) whose
    source text contains `needle`; the `occurrence`-th one in file order."""
    tree, lines = _tree(path)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name not in LEVELS and name not in ("log_fn",):
            continue
        seg = "\n".join(lines[node.lineno - 1 : node.end_lineno])
        if needle in seg:
            found.append(node)
    found.sort(key=lambda n: (n.lineno, n.col_offset))
    if not found:
        # The format string may sit in a variable a few lines above the call
        # (uvicorn: message = "Started server process [%d]"; logger.info(message, ...)).
        needle_lines = [i + 1 for i, line in enumerate(lines) if needle in line]
        calls = sorted(
            (n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and (n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", None)) in LEVELS),
            key=lambda n: (n.lineno, n.col_offset))
        for ln in needle_lines:
            nxt = next((c for c in calls if ln < c.lineno <= ln + 4), None)
            if nxt is not None:
                found.append(nxt)
    if len(found) <= occurrence:
        raise SourceCallNotFound(f"no logger call containing {needle!r} in {path}")
    return found[occurrence]


def call_lineno(call: ast.Call) -> int:
    """The line CPython 3.11 reports (record.lineno) for a call: the line where the
    called expression ends (`logger.info(` / `.warning(` / `log_fn(`)."""
    return call.func.end_lineno


def call_level(call: ast.Call, default: int = logging.INFO) -> int:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id
    return LEVELS.get(name, default)


def eval_call_args(path: str, call: ast.Call, ns: dict) -> list:
    """Evaluate the call's positional argument expressions as written in the source."""
    out = []
    for a in call.args:
        if isinstance(a, ast.Starred):
            raise ValueError("starred log args are not supported")
        expr = ast.Expression(body=a)
        ast.fix_missing_locations(expr)
        code = compile(expr, path, "eval")
        out.append(eval(code, {"__builtins__": builtins}, dict(ns)))
    return out


def emit_at(path: str, lineno: int, logger: logging.Logger, level: int, args: list) -> None:
    """Call logger.log(level, *args) from a frame whose code object is `path` at
    `lineno`, so the LogRecord carries that file name and line number."""
    src = "\n" * (lineno - 1) + "__lg__.log(__lv__, *__a__)\n"
    code = compile(src, path, "exec")
    exec(code, {"__lg__": logger, "__lv__": level, "__a__": args, "__name__": logger.name})


class SourceCall:
    """One logger call of an installed package file, re-issued with driver values."""

    def __init__(self, root: str, rel: str, needle: str, logger_name: str, occurrence: int = 0,
                 level: int | None = None):
        self.path = os.path.join(root, rel)
        self.rel = rel
        self.needle = needle
        self.call = find_log_call(self.path, needle, occurrence)
        self.lineno = call_lineno(self.call)
        self.level = level if level is not None else call_level(self.call)
        self.logger_name = logger_name
        # `message = "..."` a few lines above `logger.info(message, ...)`: evaluated first.
        tree, _ = _tree(self.path)
        names = {a.id for a in self.call.args if isinstance(a, ast.Name)}
        self.pre = []
        for node in ast.walk(tree):
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name) and node.targets[0].id in names
                    and self.call.lineno - 6 <= node.lineno < self.call.lineno):
                self.pre.append(node)
        self.pre.sort(key=lambda n: n.lineno)

    def source_text(self) -> str:
        _, lines = _tree(self.path)
        return "\n".join(lines[self.call.lineno - 1 : self.call.end_lineno])

    def __call__(sc, /, **ns) -> None:  # noqa: N805  (`self` is a name the source expressions use)
        for node in sc.pre:
            if node.targets[0].id in ns:
                continue
            expr = ast.Expression(body=node.value)
            ns[node.targets[0].id] = eval(compile(expr, sc.path, "eval"), {"__builtins__": builtins}, dict(ns))
        args = eval_call_args(sc.path, sc.call, ns)
        emit_at(sc.path, sc.lineno, logging.getLogger(sc.logger_name), sc.level, args)


def ns(**kw) -> types.SimpleNamespace:
    return types.SimpleNamespace(**kw)


def source_line_of(path: str, needle: str, occurrence: int = 0) -> int:
    """1-based line number of the `occurrence`-th line of `path` containing `needle`."""
    _, lines = _tree(path)
    hits = [i + 1 for i, line in enumerate(lines) if needle in line]
    if len(hits) <= occurrence:
        raise SourceCallNotFound(f"{needle!r} not in {path}")
    return hits[occurrence]


def write_outputs(out_base: str, text: str, truth: dict) -> None:
    os.makedirs(os.path.dirname(out_base), exist_ok=True)
    with open(out_base + ".log", "w", encoding="utf-8", newline="") as f:
        f.write(text)
    with open(out_base + ".truth.json", "w", encoding="utf-8") as f:
        json.dump(truth, f, indent=1, ensure_ascii=False)
        f.write("\n")


def iso(epoch: float) -> str:
    """UTC ISO-8601 with milliseconds."""
    import datetime

    d = datetime.datetime.fromtimestamp(round(epoch, 3), tz=datetime.timezone.utc)
    return d.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def extract_def(path: str, qualname: str, globs: dict):
    """Compile one top-level function/class (or Class.method) cut out of an installed file
    with `ast`, keeping its file name and line numbers, and return the object. Decorators
    are dropped for methods cut out of their class."""
    import __future__

    tree, _ = _tree(path)
    body = tree.body
    node = None
    for part in qualname.split("."):
        node = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                     and n.name == part), None)
        if node is None:
            raise SourceCallNotFound(f"{qualname} not in {path}")
        body = node.body
    if not isinstance(node, ast.ClassDef) and "." in qualname:
        node.decorator_list = []
    mod = ast.Module(body=[node], type_ignores=[])
    code = compile(mod, path, "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True)
    name = globs.pop("__name__", "extracted")
    mod = sys.modules.get(name)
    if mod is None or not getattr(mod, "__tokenscope_extracted__", False):
        if mod is not None:  # a real module of that name is loaded: keep it, use a private one
            name = "tokenscope_extracted." + name
        mod = types.ModuleType(name)
        mod.__tokenscope_extracted__ = True
        sys.modules[name] = mod  # dataclasses look their class's module up in sys.modules
    g = mod.__dict__
    g["__builtins__"] = builtins
    g.update(globs)
    exec(code, g)
    return g[qualname.split(".")[-1]]


def module_constant(path: str, name: str):
    """Value of a module-level `NAME = <literal>` in an installed file."""
    tree, _ = _tree(path)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == name:
            return ast.literal_eval(node.value)
    raise SourceCallNotFound(f"{name} not in {path}")
