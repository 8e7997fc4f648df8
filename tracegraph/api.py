"""`tg.compile` and CompiledFunction: signature cache, trace -> passes -> lower -> backend."""
from __future__ import annotations

import functools
import inspect
import logging
import threading
import warnings
import weakref
from dataclasses import dataclass
from typing import Any, Callable


from . import _numba, arrays, backends, config, pytree
from .errors import SignatureError, TraceError
from .ir import Program
from .lower import Plan, lower
from .passes import run_passes
from .signature import FLOATS, describe_mismatch, static_key
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
        return any(b.kind == "external" for b in self.program.buffers)


class _Call:
    """One call's flattened arguments, what they are, and its signature key."""
    __slots__ = ("leaves", "paths", "tree", "infos", "key")

    def __init__(self, leaves: list, paths: list, tree: Any, infos: list, key: tuple):
        self.leaves, self.paths, self.tree, self.infos, self.key = leaves, paths, tree, infos, key


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
        self._pysig = inspect.signature(fn)
        params = list(self._pysig.parameters.values())
        self._simple_arity = (len(params) if all(
            p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
            for p in params) else None)
        self._param_names = list(self._pysig.parameters)
        self._memo: tuple | None = None  # (weak) last arguments and their _Call parts
        self._flat_tree = pytree.structure(((0,) * len(params), {}))
        functools.update_wrapper(self, fn)
        if not hasattr(self, "__qualname__"):  # a callable object or a partial
            self.__qualname__ = getattr(fn, "__name__", type(fn).__name__)

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
        call = self._reuse(args) if not kwargs else None
        if call is None:
            call = self._prepare(args, kwargs)
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
        call = self._reuse(args) if not kwargs else None
        if call is None:
            call = self._prepare(args, kwargs)
        entry = self._cache.get(call.key)
        if entry is not None and entry.captured:
            entry = self._for_captured(entry, call, compile_missing=False)
        if entry is None:
            raise self._signature_error(call)
        return entry.executable.run(call.leaves, call.infos, stream)

    def trace(self, *args: Any, **kwargs: Any) -> Program:
        """The Program (dependency DAG) for these arguments; nothing runs."""
        return self._trace(self._prepare(args, kwargs))

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
            self._memo = None

    def __repr__(self) -> str:
        return f"<tracegraph.CompiledFunction {self.__qualname__}: {len(self._cache)} graphs>"

    # -- internals ------------------------------------------------------------
    def _reuse(self, args: tuple) -> _Call | None:
        """The last call's analysis, when called again with the very same objects whose
        metadata cannot change (device arrays, scalars): the common replay loop."""
        memo = self._memo
        if memo is not None:
            last_args, last_leaves, rest, extents = memo
            if len(args) != len(last_args):
                return None
            for a, r in zip(args, last_args):
                if (r[0] if type(r) is tuple else r()) is not a:
                    return self._reuse_moved(args, memo) if extents is not None else None
            leaves = (list(args) if last_leaves is None else
                      [r[0] if type(r) is tuple else r() for r in last_leaves])
            return _Call(leaves, *rest)
        return None

    def _reuse_moved(self, args: tuple, memo: tuple) -> _Call | None:
        """The last call's signature for other arrays of the same shape, dtype, strides and
        placement where the last call had no two arguments sharing memory and these do not
        either (a ping-pong loop): only the new arrays are described."""
        last_args, _, (paths, tree, infos, key), extents = memo
        infos, extents = list(infos), list(extents)
        moved = []
        for i, (a, r) in enumerate(zip(args, last_args)):
            if (r[0] if type(r) is tuple else r()) is a:
                continue
            old = infos[i]
            if old is None or not arrays.has_fixed_metadata(a):
                return None
            info = arrays.describe(a)
            if info is None or info.placement != old.placement or info.shape != old.shape or \
                    info.strides != old.strides or info.dtype != old.dtype:
                return None
            infos[i], extents[i] = info, info.extent
            moved.append(i)
        for i in moved:
            lo, hi = extents[i]
            for j, e in enumerate(extents):
                if j != i and e is not None and lo < e[1] and e[0] < hi and \
                        infos[j].placement == infos[i].placement:
                    return None  # now sharing memory: another signature
        self._memo = (tuple(map(_ref, args)), None, (paths, tree, infos, key), extents)
        return _Call(list(args), paths, tree, infos, key)

    def _for_captured(self, entry: Compiled, call: _Call, *, compile_missing: bool) -> Any:
        """The graph compiled for how this call's device inputs overlap the captured
        arrays (ordering between them depends on it), compiling it if asked."""
        pairs = aliased_inputs(entry.program.buffers, list(entry.program.inputs), call.infos)
        if pairs == entry.program.aliased_inputs:
            return entry
        key = call.key + (("captured overlap", tuple(sorted(pairs))),)
        variant = self._cache.get(key)
        if variant is None and compile_missing:
            log.info("%s: a device input now overlaps a captured array; compiling for that",
                     self.__qualname__)
            variant = self._compile(_Call(call.leaves, call.paths, call.tree, call.infos, key))
        return variant

    def _prepare(self, args: tuple, kwargs: dict) -> _Call:
        """Flatten the arguments, describe the arrays, and build the signature key."""
        if not kwargs and len(args) == self._simple_arity and all(map(pytree.is_leaf, args)):
            leaves, paths, tree = list(args), self._param_names, self._flat_tree
        else:
            leaves, paths, tree = self._bind(args, kwargs)
        infos = [arrays.describe(x) for x in leaves]
        groups = arrays.alias_groups(infos)
        key_parts = [tree]
        for leaf, info, group in zip(leaves, infos, groups):
            if info is None:
                t = type(leaf)
                # -0.0 == 0.0 and nan != nan: floats are keyed by their exact repr
                key_parts.append((t, repr(leaf) if t in FLOATS else leaf))
            else:
                key_parts.append((info.placement, info.shape, info.dtype, info.strides, group))
        key = tuple(key_parts)
        try:
            hash(key)
        except TypeError:
            bad = next(p for p, leaf, info in zip(paths, leaves, infos)
                       if info is None and not _hashable(leaf))
            raise TraceError(f"argument {bad} of type {type(leaves[paths.index(bad)]).__name__} "
                             "cannot live in a graph", where=user_location(3),
                             fix="pass arrays, scalars, or tuples/lists/dicts of these") from None
        call = _Call(leaves, paths, tree, infos, key)
        if not kwargs and all(arrays.has_fixed_metadata(a) for a in args):
            # weakly: a compiled function must not keep its caller's arrays alive
            simple = len(leaves) == len(args) and all(leaf is a for leaf, a in zip(leaves, args))
            firsts = [g[0] for g in groups if g is not None]
            # where no two arguments share memory, _reuse_moved can take other arrays
            extents = ([i.extent if i is not None else None for i in infos]
                       if simple and len(set(firsts)) == len(firsts) else None)
            self._memo = (tuple(map(_ref, args)), None if simple else tuple(map(_ref, leaves)),
                          (paths, tree, infos, key), extents)
        return call

    def _bind(self, args: tuple, kwargs: dict) -> tuple[list, list, Any]:
        try:
            bound = self._pysig.bind(*args, **kwargs)
        except TypeError as exc:
            got = f"{len(args)} positional argument(s)" + (
                f" and the keyword(s) {', '.join(kwargs)}" if kwargs else "")
            raise SignatureError(f"{self.__qualname__}() got arguments that do not match its "
                                 f"parameters {self._pysig}: {exc} (got {got})",
                                 where=user_location(4),
                                 fix=f"call it as {self.__qualname__}{self._pysig}") from None
        bound.apply_defaults()
        positional = self._positional_names(len(bound.args))
        # keyword arguments by name: f(x, p=1, q=2) and f(x, q=2, p=1) are one signature
        # (**kwargs arrive sorted)
        tree_in = (tuple(bound.args), dict(bound.kwargs))

        def name(accessor: Any) -> str:
            head, rest = accessor[1].entry, pytree.optree.PyTreeAccessor(accessor[2:])
            root = positional[head] if accessor[0].entry == 0 else str(head)
            return rest.codify(root)

        return pytree.flatten(tree_in, name)

    def _positional_names(self, n: int) -> list[str]:
        """Names of the first n positional arguments; `*args` ones are `args[k]`."""
        names, var = [], "args"
        for p in self._pysig.parameters.values():
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                names.append(p.name)
            elif p.kind == p.VAR_POSITIONAL:
                var = p.name
        return names[:n] + [f"{var}[{k}]" for k in range(n - len(names))]

    def _trace(self, call: _Call) -> Program:
        groups = arrays.alias_groups(call.infos)
        return run_passes(trace_function(self._fn, call.leaves, call.paths, call.tree,
                                         call.infos, groups))

    def _compile(self, call: _Call) -> Compiled:
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
                if inp.kind == "static" and _hashable(inp.value):
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

    def _signature_error(self, call: _Call) -> SignatureError:
        where = user_location(3)
        name = self.__qualname__
        if not self._cache:
            return SignatureError(f"{name}.replay() was called before anything was compiled",
                                  where=where, fix=f"call {name}(...) once to trace and compile")
        best = min(self._cache.values(), key=lambda e: _distance(e.key, call.key))
        diffs = describe_mismatch(best.program, call, self._positional_names)
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


_NO_WEAKREF: set[type] = set()


def _ref(x: Any) -> Any:
    """A weak reference to x (an array), or (x,) for what has none (scalars, None)."""
    t = type(x)
    if t not in _NO_WEAKREF:
        try:
            return weakref.ref(x)
        except TypeError:
            _NO_WEAKREF.add(t)
    return (x,)


def _hashable(x: Any) -> bool:
    try:
        hash(x)
        return True
    except TypeError:
        return False


def _distance(a: tuple, b: tuple) -> int:
    return sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b)) * 10


def compile(fn: Callable | None = None, *, backend: str = "auto") -> Any:  # noqa: A001
    """Decorator: `@tg.compile` or `@tg.compile(backend="sim")`."""
    config.configure_logging()
    if fn is None:
        return lambda f: CompiledFunction(f, backend)
    return CompiledFunction(fn, backend)
