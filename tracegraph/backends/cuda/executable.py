"""One compiled signature on the GPU: its memory, its instantiated graph, and replay."""
from __future__ import annotations

import logging
import threading
from typing import Any

from ... import config
from ...contract import holds as checks_hold
from ...errors import CudaError, TracegraphError
from ...ir import OpKind
from ...plan import Plan, PlanNode, input_bases, replay_table
from ...signature import (
    ArrayInfo,
    array_key,
    describe,
    disjoint,
    has_fixed_metadata,
    same_value,
    weak,
)
from .. import MISS
from ..sim import loop_limit_error
from .build import GraphBuilder
from .memory import GraphMemory
from .moved_inputs import captured_extents, overlaps, watched_inputs
from .platform import error_name, platform
from .replay import Replayer

log = logging.getLogger("tracegraph.backends.cuda")

_thread = threading.local()  # the device made current on this thread


class CudaExecutable:
    """Built on the compiling call's addresses, instantiated once (again only when a moved
    input changes how it is followed), replayed with one launch."""

    backend = "cuda"

    def __init__(self, plan: Plan, infos: list | None = None, take_over: Any = None,
                 arena: Any = None, device: int | None = None):
        self.plan = plan
        self.platform = platform(device)
        self.device = self.platform.device_id
        self.platform.set_current()
        self._lock = threading.Lock()
        self._callback_errors: list[tuple[PlanNode, BaseException]] = []
        self.table = replay_table(plan)
        first_call = input_bases(self.table, infos)[0] if infos is not None else {}
        self.memory = GraphMemory(plan, self.table, self.platform, first_call, arena)
        self.watch = watched_inputs(plan, self.memory.base, config.moved_inputs_mode())
        self.builder = GraphBuilder(plan, self.memory, self.watch, self.platform, self._guarded)
        self.replayer = Replayer(plan, self.table, self.memory, self.platform, self.watch,
                                 self.builder.recapture)
        self.updated = False  # instantiated, or updated another's executable in place
        self.built = self.builder.build(instantiate=take_over is None)
        if take_over is not None:
            self._take_over(take_over)
        self.replayer.attach(self.built)
        # NumPy inputs and held host data: the next call refills pinned staging (or the
        # caller may reuse a page-locked array), so the graph must have read them before
        # this call returns; NumPy results are read on return
        # loops that raise at their limit: read after the run
        self._limits = [n for n in _all_nodes(plan.nodes) if n.kind == OpKind.CONDITIONAL
                        and n.op.conditional.raise_at_limit]
        self._needs_sync = bool(self.table.host_inputs or self.table.constants or self._limits) \
            or any(o.kind == "host" for o in plan.outputs)
        # a replay with the very arguments of the last call, nothing to follow or stage:
        # launch and hand out the results (replay_same)
        # (an input that copying could serve: while its policy is idle, a call of the very
        # same objects has nothing to observe; one that moves takes the full path)
        self._plain = not (self._needs_sync or self.replayer.scalar_values or
                           self.table.host_inputs or self.table.constants)
        self._watched_leaves = frozenset(leaf for leaf, *_ in self.replayer.watched)
        self.armed: tuple | None = None  # the last call's leaves (weakly), when plain
        self._checks: tuple = ()  # what must hold for a direct replay besides (run)
        # (graph exec, stream, result) for the C replay of an armed call (fast_result),
        # set before `armed` whenever it is armed; read with it under the GIL
        self.fast: tuple | None = None
        self._fast_replay = self.platform.fast_replay()
        self._fast_result = self._fast_result_index()
        self._armed_infos: list = []
        self._armed_disjoint = False
        self._armed_arrays = 0
        self._captured = captured_extents(plan, self.memory.base)
        self._armed_overlaps: frozenset = frozenset()
        # (argument position, id) -> (weak reference, info) of arrays a direct call took
        # in the armed signature's place: fixed metadata, so described once (ping-pong)
        self._seen: dict[tuple[int, int], tuple[Any, ArrayInfo]] = {}
        self._default_stream = self.platform.stream(None)
        # (graph, its launcher on the default stream): made again when the graph is replaced
        self._launcher: tuple[Any, Any] = (None, None)
        self._stream_launcher: tuple[Any, ...] = (None, None, None, None)

    @property
    def gdef(self) -> Any:
        return self.built.gdef

    @property
    def graph(self) -> Any:
        return self.built.graph

    def run(self, leaves: list[Any], infos: list[ArrayInfo | None], stream: Any = None,
            arm: bool = False, checks: tuple = ()) -> Any:
        """One replay. `arm`: these leaves are the caller's arguments, of fixed metadata,
        so the next call with the very same objects may take replay_same while `checks`
        hold (the checked names still find what they found: contract.holds)."""
        if getattr(_thread, "platform", None) is not self.platform:  # a thread's first
            self.platform.set_current()
            _thread.platform = self.platform
        with self._lock:
            self.armed = None  # the graph may now point elsewhere
            self._raise_callback_errors()
            r = self.replayer
            r.follow_device_inputs(infos)
            if r.watched and r.follow_watched(infos):
                self._rebuild()
            r.free_results()
            if r.scalar_values:
                r.follow_scalars(leaves)
            staged = r.stage_host_inputs(infos)
            s = self._launch(stream)
            if self._needs_sync:
                try:
                    s.sync()
                except Exception as exc:
                    raise self._fault(exc, "cuStreamSynchronize") from exc
                self._raise_callback_errors()
                r.write_back(staged, leaves)
                self._check_limits()
            if arm and self._plain and r.watch_idle():  # (one graph's launches are ordered)
                self._checks = checks
                self.fast = self._fast_args(stream, checks)
                self.armed = tuple(map(weak, leaves))
                self._armed_infos = list(infos)
                self._armed_disjoint = disjoint(infos)
                self._armed_arrays = sum(i is not None for i in infos)
                self._armed_overlaps = overlaps(infos, self._captured)
            return r.results(leaves)

    def replay_same(self, args: tuple, stream: Any = None) -> Any:
        """The replay of a call with the very objects of the last one (armed): the graph
        already points at them, so only held results move and the graph launches. Device
        arrays in place of some of them, of the same signature (shape, dtype, strides,
        placement, none sharing memory, as none did), are followed by re-pointing. MISS
        when it does not apply. The host time of this path is the library's replay cost
        (docs/performance.md, W7): keep it to attribute reads and the launch."""
        if self._fast_replay is not None and \
                getattr(_thread, "platform", None) is self.platform:
            try:
                result = self._fast_replay(self, args, stream)
            except RuntimeError as exc:
                raise self._fault(exc, "cuGraphLaunch") from exc
            if result is not NotImplemented:
                return result
        armed = self.armed
        if armed is None or len(armed) != len(args) \
                or getattr(_thread, "platform", None) is not self.platform:
            return MISS  # a thread's first call: the full path makes the device current
        if self._checks and not checks_hold(self._checks, args):
            return MISS  # a kernel's name finds another: the full path traces for it
        with self._lock:
            armed = self.armed  # another thread's call may have moved the graph since
            if armed is None or len(armed) != len(args):
                return MISS
            moved = [k for k, (a, ref) in enumerate(zip(args, armed))
                     if (ref[0] if type(ref) is tuple else ref()) is not a]
            r = self.replayer
            if moved:
                infos = self._moved(args, moved)
                if infos is None:
                    return MISS
                self._raise_callback_errors()
                self.armed = None  # until the graph points at these
                r.follow_device_inputs(infos)
                self.armed, self._armed_infos = tuple(map(weak, args)), infos
            elif self._callback_errors:
                self._raise_callback_errors()
            if self.table.results:
                r.free_results()
            launcher = self._launcher
            if stream is None and launcher[0] is self.built.graph \
                    and self.memory.arena_allocation is None:
                try:
                    launcher[1]()
                except Exception as exc:
                    raise self._fault(exc, "cuGraphLaunch") from exc
            else:
                self._launch(stream)
            return r.results(args)

    def _fast_result_index(self) -> int | None:
        """What the C replay returns (-1: None, k: argument k), or None where a replay has
        more to do than launch (results to move, host callbacks whose errors it raises)."""
        if not self._plain or self.table.results or \
                any(n.kind == OpKind.HOST for n in _all_nodes(self.plan.nodes)):
            return None
        if self.replayer._returns_none:
            return -1
        single = self.table.single_output
        if single is not None and single.kind == "input":
            return single.input_index
        return None

    def _fast_args(self, stream: Any, checks: tuple) -> tuple | None:
        """(graph exec, stream handle, result, the caller's stream object, checks) for the
        C replay of a call on that same stream object (None: the default stream) while
        the checks hold."""
        if self._fast_replay is None or self._fast_result is None or \
                self.memory.arena_allocation is not None:
            return None
        graph = self.built.graph
        if stream is None:
            s = self._default_stream
        else:  # what _launch just made for this stream object (and keeps it alive)
            cached = self._stream_launcher
            if cached[0] is not graph or cached[1] is not stream:
                return None
            s = cached[2]
        return (int(graph.handle), int(s.handle), self._fast_result, stream, checks)

    def _moved(self, args: tuple, moved: list[int]) -> list | None:
        """The infos of the armed call with arguments `moved` replaced by these, if the
        call keeps the armed signature (else None: the full path decides)."""
        infos = list(self._armed_infos)
        seen = self._seen
        for k in moved:
            old, a = infos[k], args[k]
            if old is None and same_value(a, self.armed[k]):  # type: ignore[index]
                continue  # an equal scalar: the same signature, nothing to follow
            if old is None or k in self._watched_leaves:
                return None
            hit = seen.get((k, id(a)))
            if hit is not None and hit[0]() is a:  # ping-pong: described before
                infos[k] = hit[1]
                continue
            if not has_fixed_metadata(a):
                return None
            info = describe(a)
            if info is None or array_key(info, None) != array_key(old, None):
                return None  # another signature (the memo's test, signature/call.py)
            infos[k] = info
            if type(ref := weak(a)) is not tuple:
                if len(seen) >= 8:
                    seen.clear()
                seen[(k, id(a))] = (ref, info)
        if not self._armed_disjoint:
            return None
        if self._armed_arrays > 1 and not disjoint(infos):
            return None  # sharing memory is another signature
        if self._captured and overlaps(infos, self._captured) != self._armed_overlaps:
            return None  # how inputs overlap captured arrays is another graph
        return infos

    def _launch(self, stream: Any) -> Any:
        """Launch the graph on the caller's stream (the default one for None); returns it."""
        graph = self.built.graph
        if stream is None:
            s = self._default_stream
            if self._launcher[0] is not graph:
                self._launcher = (graph, self.platform.graph_launcher(graph, s))
            launch = self._launcher[1]
        else:  # the caller's stream of the last call, kept while it is passed again
            cached = self._stream_launcher
            if cached[0] is not graph or cached[1] is not stream:
                s = self.platform.stream(stream)
                cached = self._stream_launcher = (graph, stream, s,
                                                  self.platform.graph_launcher(graph, s))
            s, launch = cached[2], cached[3]
        # several graphs of one function share its arena: order them on the GPU
        shared = self.memory.arena_allocation is not None and self.memory.arena.users > 1
        if shared:
            self._after_the_arena_s_last_launch(s)
        try:
            launch()
        except TracegraphError:  # the CPU stand-in running a sim= function: as on sim
            raise
        except Exception as exc:
            raise self._fault(exc, "cuGraphLaunch") from exc
        if shared:
            self.memory.arena.last = (s, s.record())
        return s

    def _take_over(self, other: CudaExecutable) -> None:
        """Update `other`'s instantiated graph (same topology) into this one's definition:
        cheaper than instantiating (docs/dynamic-shapes.md); instantiate if the driver
        refuses."""
        graph = other.built.graph
        try:
            with other._lock:
                # first: no direct replay of `other` may launch the graph being updated
                other.armed = other.fast = None
                self.platform.synchronize()  # its memory goes once it is idle
                graph.update(self.built.gdef)
                other.built.graph = None  # ours now: `other` must not close it
            self.built.graph = graph
            self.builder.upload(self.built)
            self.updated = True
        except Exception as exc:  # the driver's reason, logged
            log.info("%s: updating an executable in place failed (%s); instantiating",
                     self.plan.name, exc)
            self.builder.instantiate(self.built)

    @property
    def device_bytes(self) -> int:
        """Graph-owned device memory this executable holds."""
        return self.memory.device_bytes()

    def _after_the_arena_s_last_launch(self, stream: Any) -> None:
        """Graphs sharing the function's arena run one at a time: a launch on another
        stream than the last one waits for it on the GPU."""
        last = self.memory.arena.last
        if last is not None and last[0] is not stream:
            stream.wait(last[1])

    def _rebuild(self) -> None:
        """A watched input changed how it is followed: build and instantiate again on the
        current addresses; release the old executable once the GPU is idle (its callbacks
        live in the old definition, kept until then)."""
        old = self.built
        self.built = self.builder.build()
        self.replayer.attach(self.built)
        self.platform.synchronize()
        old.graph.close()

    def _check_limits(self) -> None:
        """A loop asked to raise at its limit that stopped there with its flag set."""
        for node in self._limits:
            c = node.op.conditional
            base = self.memory.base
            counter = self.platform.read_bytes(base[c.counter.buffer] + c.counter.offset, 4)
            flag = self.platform.read_bytes(base[c.flag.buffer] + c.flag.offset,
                                            c.flag.dtype.itemsize)
            if flag.view(c.flag.dtype)[0] != 0 and \
                    counter.view("i4")[0] >= c.max_iterations:
                raise loop_limit_error(node)

    def _guarded(self, fn: Any, node: PlanNode) -> Any:
        errors = self._callback_errors

        def call() -> None:
            try:
                fn()
            except BaseException as exc:
                errors.append((node, exc))
        return call

    def _raise_callback_errors(self) -> None:
        if not self._callback_errors:
            return
        node, exc = self._callback_errors.pop(0)
        self._callback_errors.clear()
        cuda_call = "cuda" in type(exc).__name__.lower() or "CUDA" in str(exc)
        raise TracegraphError(
            f"host callback {node.op.name} raised {type(exc).__name__}: {exc}",
            where=node.location,
            fix=("host callbacks must not call CUDA (no launches, copies or synchronization); "
                 "move that work into the traced function" if cuda_call else
                 "fix the callback; it runs on a driver thread while the graph is in flight"))

    def _fault(self, exc: BaseException, call: str) -> CudaError:
        kernels = [f"{n.op.describe()} at {n.location}" for n in self.plan.nodes
                   if n.kind == "kernel"]
        shown = "; ".join(kernels[:6]) + (f"; ... ({len(kernels)} kernels)" if len(kernels) > 6
                                          else "")
        return CudaError(f"the graph of {self.plan.name} failed on the GPU: {exc}",
                         error_name=error_name(exc), call=call,
                         node=f"one of its kernel nodes ({shown})",
                         fix="an illegal address usually means a kernel indexed out of bounds; "
                             "run the function with backend='sim' to find which launch, and "
                             "restart the process (the CUDA context is lost)")

    def driver_dot(self) -> str:
        """The driver's own DOT dump of this graph (cuGraphDebugDotPrint)."""
        return self.platform.dot(self.built.gdef)

    def close(self) -> None:
        """Release the executable (evicted): after a call running on it now, and so that
        no direct replay (Python or C) launches it afterwards."""
        with self._lock:
            self.armed = self.fast = None
            graph = self.built.graph if self.built is not None else None
            if graph is not None and not graph.is_closed:
                self.platform.synchronize()  # it may still be running
                graph.close()


def _all_nodes(nodes: tuple) -> list:
    out = []
    for n in nodes:
        out.append(n)
        for body in n.bodies:
            out += _all_nodes(body)
    return out


def build(plan: Plan, infos: list | None = None, take_over: Any = None,
          arena: Any = None, device: int | None = None) -> CudaExecutable:
    return CudaExecutable(plan, infos, take_over, arena, device)
