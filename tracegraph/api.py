"""`tg.compile` and CompiledFunction: signature cache, trace -> passes -> lower -> backend."""
from __future__ import annotations

import functools
import inspect
import logging
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import _numba, backends, config
from .errors import SignatureError, TraceError
from .ir import EXTERNAL, Program
from .lower import Plan, lower
from .passes import run_passes
from .signature import Call, CallAnalyzer, alias_groups, describe_mismatch, hashable, static_key
from .trace import aliased_inputs, trace_function, user_location

log = logging.getLogger("tracegraph.api")

MANY_GRAPHS = 16  # warn once a function has compiled this many graphs

@dataclass(frozen=True)
class Compiled:
    """One signature's compiled graph."""
    key: tuple
    program: Program
    plan: Plan
    executable: Any

    @property
    def captured(self) -> bool:
        """Does the graph use device arrays captured by address (whose overlap with the
        inputs is part of what was compiled)?"""
        return any(b.kind == EXTERNAL for b in self.program.buffers)


class CompiledFunction:
    """A traced function: one compiled graph per input signature."""

    def __init__(self, fn: Callable, backend: str = "auto"):
        if backend not in backends.BACKENDS:
            raise TraceError(f"unknown backend {backend!r}", where=user_location(3),
                             fix=f"use one of {backends.BACKENDS}")
        if "stream" in inspect.signature(fn).parameters:
            raise TraceError(f"{getattr(fn, '__qualname__', fn)} has a parameter named stream, "
                             "which is tracegraph's keyword for the CUDA stream a call runs on",
                             where=user_location(3),
                             fix="rename the parameter (e.g. to cuda_stream); pass the graph's "
                                 "stream as f(..., stream=s)")
        self._fn = fn
        self._backend_choice = backend
        self._backend: str | None = None
        self._cache: dict[tuple, Compiled] = {}
        self._latest: Compiled | None = None
        self._lock = threading.RLock()
        functools.update_wrapper(self, fn)
        if not hasattr(self, "__qualname__"):  # a callable object or a partial
            self.__qualname__ = getattr(fn, "__name__", type(fn).__name__)
        self._calls = CallAnalyzer(fn, self.__qualname__)

    # -- public ---------------------------------------------------------------
    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        """On a method: bound to the instance, which is a static argument of each call
        (one graph per instance, its captured device arrays by address)."""
        if obj is None:
            return self
        return BoundCompiledFunction(self, obj)

    @property
    def backend(self) -> str:
        """The backend this function runs on ("cuda" or "sim")."""
        if self._backend is None:
            self._backend = backends.resolve(self._backend_choice)
        return self._backend

    def __call__(self, *args: Any, stream: Any = None, **kwargs: Any) -> Any:
        """Run: trace, compile and launch on the first call of a signature, else replay.
        Inside another compiled function's trace, its launches join that trace."""
        if _numba.current_tracer() is not None:
            return self._fn(*args, **kwargs)
        call = self._calls.analyze(args, kwargs)
        entry = self._cache.get(call.key)
        if entry is not None and entry.captured:
            entry = self._for_captured(entry, call, compile_missing=True)
        if entry is None:
            entry = self._compile(call)
        return entry.executable.run(call.leaves, call.infos, stream)

    def replay(self, *args: Any, stream: Any = None, **kwargs: Any) -> Any:
        """Replay an already compiled signature; never traces (inside another compiled
        function's trace, its launches join that trace)."""
        if _numba.current_tracer() is not None:
            return self._fn(*args, **kwargs)
        call = self._calls.analyze(args, kwargs)
        entry = self._cache.get(call.key)
        if entry is not None and entry.captured:
            entry = self._for_captured(entry, call, compile_missing=False)
        if entry is None:
            raise self._signature_error(call)
        return entry.executable.run(call.leaves, call.infos, stream)

    def trace(self, *args: Any, **kwargs: Any) -> Program:
        """The Program (dependency DAG) for these arguments; nothing runs."""
        return self._trace(self._calls.analyze(args, kwargs))

    def lower(self, *args: Any, **kwargs: Any) -> Plan:
        """The Plan (explicit graph nodes) for these arguments; nothing runs."""
        return lower(self.trace(*args, **kwargs))

    @property
    def compiled(self) -> tuple[Compiled, ...]:
        return tuple(self._cache.values())

    @property
    def latest(self) -> Compiled | None:
        """The most recently compiled signature."""
        return self._latest

    def clear(self) -> None:
        """Drop every compiled graph (they are released once nothing else holds them)."""
        with self._lock:
            self._cache.clear()
            self._latest = None
            self._calls.forget()

    def __repr__(self) -> str:
        return f"<tracegraph.CompiledFunction {self.__qualname__}: {len(self._cache)} graphs>"

    # -- internals ------------------------------------------------------------
    def _for_captured(self, entry: Compiled, call: Call, *, compile_missing: bool) -> Any:
        """The graph compiled for how this call's device inputs overlap the captured
        arrays (ordering between them depends on it), compiling it if asked."""
        pairs = aliased_inputs(entry.program.buffers, list(entry.program.inputs), call.infos)
        if pairs == entry.program.aliased_inputs:
            return entry
        key = (*call.key, ("captured overlap", tuple(sorted(pairs))))
        variant = self._cache.get(key)
        if variant is None and compile_missing:
            log.info("%s: a device input now overlaps a captured array; compiling for that",
                     self.__qualname__)
            variant = self._compile(call.with_key(key))
        return variant

    def _trace(self, call: Call) -> Program:
        groups = alias_groups(call.infos)
        return run_passes(trace_function(self._fn, call.leaves, call.paths, call.tree,
                                         call.infos, groups))

    def _compile(self, call: Call) -> Compiled:
        with self._lock:
            entry = self._cache.get(call.key)
            if entry is not None:
                return entry
            backend = self.backend
            program = self._trace(call)
            plan = lower(program)
            executable = backends.build(plan, backend, call.infos)
            entry = Compiled(call.key, program, plan, executable)
            self._cache[call.key] = entry
            self._latest = entry
            log.info("compiled %s for a new signature on %s: %d nodes", self.__qualname__,
                     backend, len(plan.nodes))
            if len(self._cache) == MANY_GRAPHS:
                self._warn_many_graphs()
            return entry

    def _warn_many_graphs(self) -> None:
        """Each new value of a Python scalar argument compiles a new graph: say which ones
        keep changing, once, when a function reaches MANY_GRAPHS graphs."""
        values: dict[str, set] = {}
        for entry in self._cache.values():
            for inp in entry.program.inputs:
                if inp.kind == "static" and hashable(inp.value):
                    values.setdefault(inp.path, set()).add(static_key(inp.value))
        changing = [path for path, seen in values.items() if len(seen) > 1]
        why = (f"the Python value of {', '.join(changing)} differs between them (each value "
               "is baked into its own graph)" if changing else
               "their arguments differ in shape, dtype, strides, placement or aliasing")
        filename, _, line = user_location(2).rpartition(":")
        warnings.warn_explicit(
            f"{self.__qualname__} has compiled {len(self._cache)} graphs, one per signature: "
            f"{why}. Each costs a trace and a graph build. Pass values that change on every "
            "call as device arrays (e.g. a 1-element array read by the kernel), or call "
            f"{self.__qualname__}.clear() to drop graphs no longer needed",
            UserWarning, filename or "?", int(line) if line.isdigit() else 0)

    def _signature_error(self, call: Call) -> SignatureError:
        where = user_location(3)
        name = self.__qualname__
        if not self._cache:
            return SignatureError(f"{name}.replay() was called before anything was compiled",
                                  where=where, fix=f"call {name}(...) once to trace and compile")
        best = min(self._cache.values(), key=lambda e: _distance(e.key, call.key))
        diffs = describe_mismatch(best.program, call, self._calls.positional_names)
        known = len(self._cache)
        return SignatureError(f"{name}.replay() got arguments that match none of its {known} "
                              f"compiled signature(s): " + "; ".join(diffs),
                              where=where,
                              fix=f"pass arguments like the compiled call, or call {name}(...) "
                                  "to compile this signature too")


class BoundCompiledFunction:
    """A compiled method bound to an instance: every member of CompiledFunction, with the
    instance as the first argument."""

    def __init__(self, fn: CompiledFunction, obj: Any):
        self._fn, self._obj = fn, obj

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn(self._obj, *args, **kwargs)

    def replay(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn.replay(self._obj, *args, **kwargs)

    def trace(self, *args: Any, **kwargs: Any) -> Program:
        return self._fn.trace(self._obj, *args, **kwargs)

    def lower(self, *args: Any, **kwargs: Any) -> Plan:
        return self._fn.lower(self._obj, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fn, name)


def _distance(a: tuple, b: tuple) -> int:
    return sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b)) * 10


def compile(fn: Callable | None = None, *, backend: str = "auto") -> Any:
    """Decorator: `@tg.compile` or `@tg.compile(backend="sim")`."""
    config.configure_logging()
    if fn is None:
        return lambda f: CompiledFunction(f, backend)
    return CompiledFunction(fn, backend)
