"""Import-time stand-ins for the modules vLLM's request-span code does not need at run time.

vLLM's output processor is plain Python, but the modules it imports pull in torch, CUDA custom-op registration,
the model configs and the Hugging Face stack. `install(prefixes)` puts a finder in front of `sys.meta_path` that
answers every import of a listed module (and its submodules) with a permissive fake: any attribute is a class, so
`from torch import Tensor`, `x: torch.Tensor | None`, `class A(nn.Module)` and `torch.empty(0)` all work, and the
instances are falsy and empty. Nothing on the span path calls into a fake: the request-state, iteration-stats and
tracing code that runs is vLLM's own.
"""

import importlib.abc
import importlib.machinery
import sys
import types
import typing


class _FakeMeta(type):
    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        sub = _fake_class(f"{cls.__qualname__}.{name}", cls.__module__)
        setattr(cls, name, sub)
        return sub

    def __getitem__(cls, _item):
        return cls

    def __call__(cls, *_args, **_kwargs):
        return type.__call__(cls)

    def __or__(cls, other):
        return typing.Union[cls, other]

    def __ror__(cls, other):
        return typing.Union[other, cls]


class _FakeBase(metaclass=_FakeMeta):
    def __init__(self, *_args, **_kwargs):
        pass

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _fake_class(name, "fake")()

    def __call__(self, *_args, **_kwargs):
        return _fake_class("result", "fake")()

    def __bool__(self):
        return False

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0

    def __getitem__(self, _key):
        return self


def _fake_class(qualname, module):
    name = qualname.rsplit(".", 1)[-1]
    return _FakeMeta(name, (_FakeBase,), {"__qualname__": qualname, "__module__": module})


class FakeModule(types.ModuleType):
    """A module whose every public attribute is a fake class."""

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = _fake_class(name, self.__name__)
        setattr(self, name, value)
        return value


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, prefixes):
        self.prefixes = tuple(prefixes)

    def covers(self, name):
        return any(name == p or name.startswith(p + ".") for p in self.prefixes)

    def find_spec(self, name, path=None, target=None):
        if self.covers(name):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = FakeModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


def install(prefixes, attrs=None):
    """Fakes every module named in `prefixes` (and below); `attrs` sets fixed values, e.g. torch.__version__."""
    finder = _Finder(prefixes)
    for name in list(sys.modules):
        if finder.covers(name):
            del sys.modules[name]
    sys.meta_path.insert(0, finder)
    for dotted, value in (attrs or {}).items():
        module, _, attr = dotted.rpartition(".")
        setattr(importlib.import_module(module), attr, value)
    return finder
