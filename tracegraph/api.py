"""`tg.compile` and CompiledFunction: signature -> cache -> trace -> passes -> lower ->
backend; dynamic sizes through dynamic.py and padding.py, the graphs held through cache.py."""
from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

from . import _numba, backends, config, device_memory, dynamic, padding, streams
from .backends import MISS
from .cache import CacheInfo, Compiled, GraphCache
from .collector import collection_paused
from .contract import Contract, check_same, state_of, verify_every, without_state
from .dynamic import LENGTH
from .errors import SignatureError, StaleGraphError, TraceError
from .ir import Program
from .location import warn
from .lower import Plan, lower
from .padding import Padder
from .passes import run_passes
from .signature import (
    Call,
    CallAnalyzer,
    alias_groups,
    describe_mismatch,
    device_diffs,
    device_of,
    distance,
    has_fixed_metadata,
    hashable,
    order_diffs,
    static_key,
)
from .trace import aliased_inputs, overlap_said, trace_function, user_location

log = logging.getLogger("tracegraph.api")

MANY_GRAPHS = 16  # warn once a function has compiled this many graphs (none dynamic)
RETRACES = 8  # traces for a changed checked name before a warning says what to do


class CompiledFunction:
    """A traced function: one compiled graph per input signature (per bucket, for dynamic
    sizes)."""

    def __init__(self, fn: Callable, backend: str = "auto", *,
                 dynamic: dict[str, Any] | None = None, buckets: Any = None,
                 max_size: int | None = None, pad: Any = 0, grow: bool = False,
                 max_graphs: int | None = None, key: Callable[[], Any] | None = None,
                 verify: bool | int | None = None):
        if backend not in backends.BACKENDS:
            raise TraceError(f"unknown backend {backend!r}", where=user_location(3),
                             fix=f"use one of {backends.BACKENDS}")
        # @tg.compile over @staticmethod / @classmethod: the function, bound as they bind
        self._binding = type(fn).__name__ if isinstance(fn, (staticmethod, classmethod)) \
            else None
        fn = getattr(fn, "__func__", fn) if self._binding else fn
        self._fn = fn
        self._backend_choice = backend
        self._backend: str | None = None
        self._spec = dynamic_spec = _dynamic_spec(dynamic, buckets, max_size, pad, grow)
        self._cache = GraphCache(max_graphs)
        self._latest: Compiled | None = None
        self._lock = threading.RLock()
        self._written: set[int] = set()  # leaves some compiled graph writes (dynamic calls)
        self._arenas: dict[int | None, Any] = {}  # per device: the memory its graphs share
        self._hot: Any = None  # the executable the last plain call ran (replay_same)
        # the last call's signature with its state, and padded (the replay loop's memos)
        self._keyed: tuple | None = None  # the last call's key with its state
        self._retraces = 0  # traces because a checked name or key() changed
        self._compiles = 0
        self._verify = verify_every(verify)
        self._calls_seen = 0  # calls since the last verify= trace
        self._hits = self._cache.stats.hits
        functools.update_wrapper(self, fn)
        if not hasattr(self, "__qualname__"):  # a callable object or a partial
            self.__qualname__ = getattr(fn, "__name__", type(fn).__name__)
        scalars = frozenset() if dynamic_spec is None else dynamic_spec.scalars | {LENGTH}
        self._calls = CallAnalyzer(fn, self.__qualname__, scalars)
        self._padder = Padder(dynamic_spec, self.__qualname__) \
            if dynamic_spec is not None else None
        if key is not None and not callable(key):
            raise TraceError(f"key= of {self.__qualname__} is a {type(key).__name__}, not a "
                             "callable", where=user_location(3),
                             fix="pass a function returning the state, e.g. "
                                 "key=lambda: (cfg.lr, model.version)")
        self._contract = Contract(fn, key, self.__qualname__)
        # a call or replay of the very objects of the last one launches from C (W7)
        self._own_stream = streams.has_stream_parameter(fn)
        device_memory.register(self)
        self._enter, self.replay = streams.entries(self)  # type: ignore[method-assign]

    # -- public ---------------------------------------------------------------
    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        """On a method: bound to the instance, which is a static argument of each call
        (one graph per instance, its captured device arrays by address); over a
        staticmethod, not bound; over a classmethod, bound to the class."""
        if self._binding == "staticmethod":
            return self
        if self._binding == "classmethod":
            return BoundCompiledFunction(self, objtype if objtype is not None else type(obj))
        if obj is None:
            return self
        return BoundCompiledFunction(self, obj)

    @property
    def backend(self) -> str:
        """The backend this function runs on ("cuda" or "sim")."""
        if self._backend is None:
            self._backend = backends.resolve(self._backend_choice)
        return self._backend

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run: trace, compile and launch on the first call of a signature, else replay.
        Inside another compiled function's trace, its launches join that trace. `stream=s`
        runs the graph on CUDA stream s, unless the function has a parameter named stream
        (then it is that argument): `f.on(s)(...)` works for every function."""
        return self._enter(*args, **kwargs)

    def on(self, stream: Any) -> streams.OnStream:
        """This function on CUDA stream `stream`: `f.on(s)(x)` calls, `f.on(s).replay(x)`
        replays (streams.py)."""
        return streams.OnStream(self, stream)

    def replay(self, *args: Any, stream: Any = None, **kwargs: Any) -> Any:
        """Replay an already compiled signature; never traces (inside another compiled
        function's trace, its launches join that trace)."""
        return self._call(args, stream, kwargs, compile_missing=False)

    def _slow_call(self, *args: Any, stream: Any = None, **kwargs: Any) -> Any:
        return self._call(args, stream, kwargs, compile_missing=True)

    @device_memory.said_out_of_memory
    def _call(self, args: tuple, stream: Any, kwargs: dict, *, compile_missing: bool) -> Any:
        hot = self._hot
        plain = not kwargs
        if _numba.current_tracer() is not None:  # inside a trace: its launches join it
            return self._fn(*args, **kwargs)
        if hot is not None and plain:
            result = hot.replay_same(args, stream)
            if result is not MISS:
                self._hits[0] = self._hits.get(0, 0) + 1
                return result
        call = self._calls.analyze(args, kwargs)
        compiles = self._compiles
        result = self._run(call, stream, compile_missing=compile_missing,
                           arm=args if plain else None,
                           state=self._contract.state(args, kwargs, call.key))
        if self._compiles != compiles:
            self._contract.say_after_trace(args, kwargs, first=self._compiles == 1)
        return result

    def trace(self, *args: Any, **kwargs: Any) -> Program:
        """The Program (dependency DAG) for these arguments; nothing runs."""
        call = self._calls.analyze(args, kwargs)
        if self._spec is not None and self._spec.axes:
            call = self._padded(call)[0]
        return self._trace(call)

    def lower(self, *args: Any, **kwargs: Any) -> Plan:
        """The Plan (explicit graph nodes) for these arguments; nothing runs."""
        with collection_paused():
            return lower(self.trace(*args, **kwargs))

    @device_memory.said_out_of_memory
    def warmup(self, *args: Any, **kwargs: Any) -> None:
        """Compile every bucket now (largest first, as serving stacks do, so shared memory
        is sized once), from example arguments of any length; a progress bar on a
        terminal. Without dynamic=, compiles the signature of these arguments."""
        call = self._calls.analyze(args, kwargs)
        state = self._contract.state(args, kwargs)
        if self._spec is None or not self._spec.axes:
            self._run(call, None, compile_missing=True, launch=False, state=state)
            return
        sizes = sorted(self._spec.sizes(), reverse=True)
        for b in dynamic.progress(sizes, f"tracegraph: warming up {self.__qualname__}"):
            resized = padding.resized_call(self._spec, call, b, self.__qualname__)
            leaves, paths, tree = resized
            self._run(self._calls.from_leaves(leaves, paths, tree, call.orders), None,
                      compile_missing=True, launch=False, state=state)

    def cache_info(self) -> CacheInfo:
        """Graphs held, hits and misses per bucket, updates vs instantiations, evictions,
        device bytes held."""
        return self._cache.info()

    @property
    def compiled(self) -> tuple[Compiled, ...]:
        return tuple(self._cache.entries.values())

    @property
    def latest(self) -> Compiled | None:
        """The most recently compiled signature."""
        return self._latest

    def clear(self) -> None:
        """Drop every compiled graph (they are released once nothing else holds them)."""
        with self._lock:
            self._cache.clear()
            self._hot = None
            self._latest = None
            self._arenas = {}
            self._calls.forget()
            self._keyed = None
            if self._padder is not None:
                self._padder.forget()

    def __repr__(self) -> str:
        return f"<tracegraph.CompiledFunction {self.__qualname__}: {len(self._cache)} graphs>"

    # -- running ------------------------------------------------------------------
    def _run(self, call: Call, stream: Any, *, compile_missing: bool,
             launch: bool = True, arm: tuple | None = None, state: tuple = ()) -> Any:
        """`arm`: the caller's arguments; where they are the call's leaves, of fixed
        metadata, the executable may replay the next call of the same objects directly.
        `state`: the checked names' and key()'s values (contract/), part of the key."""
        padded, signature = None, call.key
        if self._spec is not None and self._spec.axes:
            call, padded = self._padded(call, reuse=launch and stream is None, stream=stream)
        if state:
            last = self._keyed  # the last call's key, where its key and state were these
            if last is not None and last[0] is call.key and last[1] == state:
                call = call.with_key(last[2])
            else:
                unkeyed = call.key
                call = call.with_key((("state", state), *unkeyed))
                self._keyed = (unkeyed, state, call.key)
        entry = self._entry(call, compile_missing)
        if padded is not None and padded.originals:
            assert self._padder is not None  # (it padded the call)
            self._padder.refuse_captured_overlap(padded, entry.program, call.paths)
        if not launch:
            return None
        executable = entry.executable
        checks = self._contract.checks_of(arm, signature) if arm is not None and padded is None \
            and not self._verify and hasattr(executable, "replay_same") \
            and _same_objects(arm, call.leaves) and call.tree == self._calls.flat_tree \
            else None
        if checks is not None:  # (arm: these very arguments, checked as they are now)
            result = executable.run(call.leaves, call.infos, stream, arm=True, checks=checks)
            self._hot = executable
            return result
        result = executable.run(call.leaves, call.infos, stream)
        if padded is None:
            return result
        result = padding.finish(entry, padded, result, stream)
        if stream is None and self._padder is not None:
            self._padder.give_back(padded, entry.program)
        return result

    def _padded(self, call: Call, reuse: bool = False, stream: Any = None
                ) -> tuple[Call, Any]:
        assert self._padder is not None  # (a function with dynamic axes has one)
        return self._padder.pad(call, self._calls, self._written if self._cache else None,
                                reuse, stream)

    def _entry(self, call: Call, compile_missing: bool) -> Compiled:
        entry = self._cache.get(call.key)
        if entry is not None and entry.captured:
            entry = self._for_captured(entry, call, compile_missing=compile_missing)
        if entry is None:
            if not compile_missing:
                raise self._signature_error(call)
            self._retraced(call)
            return self._compile(call)
        if self._verify:
            self._calls_seen += 1
            if self._calls_seen >= self._verify:
                self._calls_seen = 0
                try:
                    check_same(entry.program, self._trace(call), self.__qualname__)
                except StaleGraphError:
                    with self._lock:  # (never replayed again: the next call traces anew)
                        self._cache.drop(entry.key)
                        self._hot = None
                    raise
        return entry

    def _retraced(self, call: Call) -> None:
        """Log a trace for a checked name or key() that changed; say what to do once it
        has happened RETRACES times."""
        state = state_of(call.key)
        if not state:
            return
        same = [e for e in self._cache.entries.values() if e.key[1:] == call.key[1:]]
        if not same:
            return
        changes = self._contract.changes(state_of(same[-1].key), state)
        log.info("%s: traced again: %s", self.__qualname__, "; ".join(changes))
        self._retraces += 1
        if self._retraces == RETRACES and changes:
            warn(
                f"tracegraph: {self.__qualname__} was traced again {self._retraces} times "
                f"because the Python state it reads changed ({changes[0]}): each trace "
                "builds a graph. Pass values that change between calls as arguments "
                "(dynamic={...} for numbers), and keep state the function sets itself "
                "outside it")

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

    # -- compiling ------------------------------------------------------------------
    def _trace(self, call: Call) -> Program:
        groups = alias_groups(call.infos)
        scalars = frozenset(i for i, p in enumerate(call.paths) if p in self._calls.scalars)
        with collection_paused():
            return run_passes(trace_function(self._fn, call.leaves, call.paths, call.tree,
                                             call.infos, groups, scalars))

    def _compile(self, call: Call) -> Compiled:
        with self._lock, collection_paused():
            entry = self._cache.get(call.key)
            if entry is not None:
                return entry
            backend = self.backend
            program = self._trace(call)
            plan = lower(program)
            bucket: int = 0
            axes: tuple[tuple[tuple[int, int, int], ...], ...] = ()
            if self._spec is not None and self._spec.axes:
                bucket = dynamic.bucket_of(self._spec, call)
                axes = dynamic.result_axes(self._spec, call, program, self._trace)
            on = device_of(call, self.__qualname__, user_location(4))
            device = backends.device_for(backend, on)
            topology = (device, tuple((n.kind, n.deps) for n in plan.nodes))
            self._hot = None
            victim = self._cache.take_over(topology)
            arena = self._arenas.get(device)
            if arena is None:
                arena = self._arenas[device] = backends.new_arena(backend)
            executable = backends.build(plan, backend, call.infos,
                                        victim.executable if victim is not None else None,
                                        arena, device)
            updated = getattr(executable, "updated", False)
            entry = Compiled(call.key, program, plan, executable, bucket, axes)
            self._cache.put(entry, updated)
            self._compiles += 1
            self._written.update(i.index for i in program.inputs if i.written)
            self._latest = entry
            log.info("compiled %s for a new signature on %s: %d nodes (%s)", self.__qualname__,
                     backend, len(plan.nodes), "updated in place" if updated else "instantiated")
            if len(self._cache) == MANY_GRAPHS and self._spec is None:
                self._warn_many_graphs()
            return entry

    def _warn_many_graphs(self) -> None:
        """Each new value of a Python scalar argument compiles a new graph: say which ones
        keep changing, once, when a function reaches MANY_GRAPHS graphs."""
        values: dict[str, set] = {}
        for entry in self._cache.entries.values():
            for inp in entry.program.inputs:
                if inp.kind == "static" and hashable(inp.value):
                    values.setdefault(inp.path, set()).add(static_key(inp.value))
        changing = [path for path, seen in values.items() if len(seen) > 1]
        why = (f"the Python value of {', '.join(changing)} differs between them (each value "
               "is baked into its own graph)" if changing else
               "their arguments differ in shape, dtype, strides, placement or aliasing")
        warn(
            f"{self.__qualname__} has compiled {len(self._cache)} graphs, one per signature: "
            f"{why}. Each costs a trace and a graph build. Declare values that change on "
            f'every call dynamic (tg.compile(dynamic={{"name": "value"}})), pass them as '
            f"device arrays, or call {self.__qualname__}.clear() to drop graphs no longer "
            "needed")

    def _signature_error(self, call: Call) -> SignatureError:
        where = user_location(4)
        name = self.__qualname__
        if not self._cache:
            return SignatureError(f"{name}.replay() was called before anything was compiled",
                                  where=where, fix=f"call {name}(...) once to trace and compile")
        device_of(call, name, user_location(4))  # arrays on two GPUs: that error
        bare = call.with_key(without_state(call.key))
        best = min(self._cache.entries.values(),
                   key=lambda e: distance(without_state(e.key), bare.key))
        diffs = device_diffs(without_state(best.key), bare) or \
            order_diffs(without_state(best.key), bare, self._calls.positional_names) or \
            describe_mismatch(best.program, bare, self._calls.positional_names)
        if best.key == call.key and best.captured:  # same arguments, other captured overlap
            diffs = [overlap_said(best.program, call)]
        elif best.key[1:] == call.key[1:] and state_of(call.key):  # other Python state
            diffs = self._contract.changes(state_of(best.key), state_of(call.key))
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

    def warmup(self, *args: Any, **kwargs: Any) -> None:
        self._fn.warmup(self._obj, *args, **kwargs)

    def on(self, stream: Any) -> streams.OnStream:
        return streams.OnStream(self._fn, stream, (self._obj,))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fn, name)


def _same_objects(args: tuple, leaves: list) -> bool:
    """The leaves are these very arguments, whose metadata can never change (the call's
    structure says whether they are all of it: a default's container, None fields only,
    holds no leaf)."""
    return len(args) == len(leaves) and all(
        a is leaf and has_fixed_metadata(a) for a, leaf in zip(args, leaves))


def _dynamic_spec(dynamic_: Any, buckets: Any, max_size: Any, pad: Any, grow: bool) -> Any:
    return dynamic.DynamicSpec.make(dynamic_, buckets, max_size, pad, grow)


def compile(fn: Callable | None = None, *, backend: str = "auto",
            dynamic: dict[str, Any] | None = None, buckets: Any = None,
            max_size: int | None = None, pad: Any = 0, grow: bool = False,
            max_graphs: int | None = None, key: Callable[[], Any] | None = None,
            verify: bool | int | None = None) -> Any:
    """Decorator: `@tg.compile`, `@tg.compile(backend="sim")`,
    `@tg.compile(dynamic={"x": 0}, buckets=(1, 2, 4, 8))` (docs/dynamic-shapes.md),
    `@tg.compile(key=lambda: (cfg.lr, model.version))` (Python state the graph depends on,
    part of the signature), `@tg.compile(verify=True)` (trace every call again and raise
    tg.StaleGraphError where the graph would differ; verify=N: every N-th call)."""
    config.configure_logging()
    options = dict(dynamic=dynamic, buckets=buckets, max_size=max_size, pad=pad, grow=grow,
                   max_graphs=max_graphs, key=key, verify=verify)
    if fn is None:
        return lambda f: CompiledFunction(f, backend, **options)
    return CompiledFunction(fn, backend, **options)
