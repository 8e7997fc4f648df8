"""The CPU reference backend: runs a Plan's nodes with Numba's CUDA simulator.

It is the spec the GPU backend must match. Nodes run one at a time in a topological
order: program order by default, or a random valid order (a seed) so that a missing
dependency edge shows up as a wrong result.
"""
from __future__ import annotations

import ctypes
import logging
import random
import threading
from dataclasses import replace
from typing import Any

import numpy as np

from .. import _numba, pytree
from ..device_memory import host_memory
from ..errors import LoweringError, TracegraphError
from ..ir import (
    DEVICE_INPUT,
    EXTERNAL,
    HOST_CONSTANT,
    HOST_INPUT,
    STAGING,
    TEMP,
    ForeignKernel,
    Op,
    OpKind,
    ScalarArg,
    View,
)
from ..plan import Plan, input_bases, replay_table
from ..signature.arguments import ArrayInfo, describe

log = logging.getLogger("tracegraph.backends.sim")

_POISON = 0xFF  # fresh graph memory reads as NaN (floats) or -1 (ints): unwritten output shows


def host_bytes(address: int, nbytes: int) -> np.ndarray:
    """A uint8 array over host memory at `address` (no copy; the owner must stay alive)."""
    if nbytes == 0:
        return np.empty(0, np.uint8)
    return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address))


def loop_limit_error(node: Any) -> TracegraphError:
    c = node.op.conditional
    return TracegraphError(f"a tg.while_ loop stopped at its limit of {c.max_iterations} "
                           "iterations with its flag still set", where=node.location,
                           fix="raise max_iterations, or check the loop's condition "
                               "(raise_at_limit=False returns instead; loop.iterations says "
                               "how many ran)")


def host_constant_bytes(buffer: Any) -> np.ndarray:
    """The current bytes of a held host array (what eager Numba copies on every call)."""
    data = np.ascontiguousarray(np.asarray(buffer.external)).reshape(-1).view(np.uint8)
    if data.nbytes != buffer.nbytes:
        raise TracegraphError(f"a host array copied to the device inside the traced function "
                              f"now has {data.nbytes} bytes instead of {buffer.nbytes}",
                              fix="keep the array's shape, or call f.clear() to trace again")
    return data


def random_topological_order(plan: Plan | tuple, seed: int) -> list[int]:
    """A valid order of a Plan's nodes (or of a body's nodes), chosen at random by seed."""
    nodes = plan.nodes if isinstance(plan, Plan) else plan
    rng = random.Random(seed)
    waiting = {n.index: len(n.deps) for n in nodes}
    users: dict[int, list[int]] = {n.index: [] for n in nodes}
    for n in nodes:
        for d in n.deps:
            users[d].append(n.index)
    ready = [i for i, k in waiting.items() if k == 0]
    order = []
    while ready:
        i = ready.pop(rng.randrange(len(ready)))
        order.append(i)
        for u in users[i]:
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.append(u)
    return order


class SimExecutable:
    """One compiled signature on the simulator. Graph memory persists between runs."""

    backend = "sim"

    def __init__(self, plan: Plan, seed: int | None = None):
        check_sim_functions(plan.nodes)
        self.plan = plan
        self.seed = seed
        self.order = (random_topological_order(plan, seed) if seed is not None
                      else [n.index for n in plan.nodes])
        # planned buffers are views of one arena (passes/memory.py), the others their own
        arena = host_memory(plan.program.arena_bytes, _POISON, "the arena of its intermediates")
        self.memory = {b.id: (arena[b.arena_offset:b.arena_offset + b.nbytes]
                              if b.arena_offset is not None else
                              host_memory(b.nbytes, _POISON, "buffer " + b.name))
                       for b in plan.buffers
                       if b.kind in (TEMP, HOST_INPUT, STAGING, HOST_CONSTANT)}
        # memory that another buffer used earlier in the run is poisoned again before its
        # first use here: fresh memory reads as 0xFF bytes, planned or not
        self.fresh: dict[int, list[int]] = {}
        seen: set[int] = set()
        for i in self.order:
            for a in plan.nodes[i].op.accesses:
                if a.buffer not in seen and plan.buffers[a.buffer].arena_offset is not None:
                    seen.add(a.buffer)
                    self.fresh.setdefault(i, []).append(a.buffer)
        self.written = frozenset(a.buffer for n in plan.nodes for a in n.op.accesses
                                 if a.writes)
        self.table = replay_table(plan)
        self._orders: dict[int, list[int]] = {}  # body -> the order its nodes run in
        self._lock = threading.Lock()

    def run(self, leaves: list[Any], infos: list[ArrayInfo | None], stream: Any = None) -> Any:  # noqa: ARG002
        with self._lock:
            return self._run(leaves, infos)

    def _run(self, leaves: list[Any], infos: list[ArrayInfo | None]) -> Any:
        plan = self.plan
        # kernels read their globals when they run here (a GPU's keep the traced arrays):
        # a name rebound since the trace would not match the graph's order
        if (ref := plan.program.rebound()) is not None:
            raise TracegraphError(f"{ref.describe()}, which kernels of {plan.name} name, was "
                                  "bound to another array or function since it was traced",
                                  fix="call f.clear() to trace it again, or pass the array "
                                      "to the kernels as an argument")
        mem = dict(self.memory)
        device_bases, staging_bases = input_bases(self.table, infos)
        copied_from_device = self._device_memory(mem, device_bases)
        for staging, base in staging_bases.items():
            ctypes.memmove(mem[staging].ctypes.data, base, plan.buffers[staging].nbytes)
        for b in self.table.constants:
            mem[b][:] = host_constant_bytes(plan.buffers[b])

        captured = self._captured(mem)
        at_limit: list[Any] = []
        for i in self.order:
            node = plan.nodes[i]
            for b in self.fresh.get(i, ()):
                mem[b][:] = _POISON
            self._execute_or_note(node, mem, captured, leaves, at_limit)

        for h in self.table.host_inputs:
            for leaf, view in h.write_back:  # each written leaf's own elements only
                leaves[leaf][...] = _ndarray(replace(view, buffer=h.staging), mem)
        for (lo, host), members in copied_from_device:
            if any(b in self.written for b in members):  # a caller's or captured array
                _numba.device_bytes(lo, host.nbytes).copy_to_device(host)
        if at_limit:
            raise loop_limit_error(at_limit[0])
        out: list[Any] = []
        shared: dict[int, list] = {}  # result buffer -> [its host copy, device copy]
        for o, same in zip(plan.outputs, self.table.same_as):
            out.append(out[same] if same is not None else self._output(o, leaves, mem, shared))
        return pytree.unflatten(plan.output_tree, out)

    def _execute_or_note(self, node: Any, mem: dict, captured: dict, leaves: list,
                         at_limit: list) -> None:
        try:
            if node.kind == OpKind.CONDITIONAL:
                self._conditional(node, mem, captured, leaves, at_limit)
            else:
                self._execute(node, mem, captured, leaves)
        except Exception as exc:
            if hasattr(exc, "add_note"):
                exc.add_note(f"while executing graph node {node.index}: {node.describe()}")
            raise

    def _conditional(self, node: Any, mem: dict, captured: dict, leaves: list,
                     at_limit: list) -> None:
        """A conditional node: its bodies run on the host, each in a valid order."""
        c = node.op.conditional

        def flag() -> int:
            return int(_ndarray(c.flag, mem).reshape(-1)[0])

        def run(body: tuple) -> None:
            for i in self._body_order(body):
                self._execute_or_note(body[i], mem, captured, leaves, at_limit)

        if c.kind == "while":
            counter = _ndarray(c.counter, mem).reshape(-1)
            counter[0] = 0
            while flag() != 0 and counter[0] < c.max_iterations:
                run(node.bodies[0])
                counter[0] += 1
            if c.raise_at_limit and flag() != 0 and counter[0] >= c.max_iterations:
                at_limit.append(node)
        elif c.kind == "if":
            if flag() != 0:
                run(node.bodies[0])
            elif len(node.bodies) > 1:
                run(node.bodies[1])
        else:
            k = flag()
            if 0 <= k < len(node.bodies):
                run(node.bodies[k])

    def _body_order(self, body: tuple) -> list[int]:
        order = self._orders.get(id(body))
        if order is None:
            order = (random_topological_order(body, self.seed + len(self._orders) + 1)
                     if self.seed is not None else list(range(len(body))))
            self._orders[id(body)] = order
        return order

    def _device_memory(self, mem: dict[int, np.ndarray], device_bases: dict[int, int]) -> list:
        """Point the caller's and captured device arrays' buffers at their memory: in place
        under the simulator; on a real GPU through one host copy per run of overlapping
        address ranges, so buffers sharing memory share the copy. Returns the copies
        [((address, host bytes), member buffers)] to write back."""
        spans = []
        for b in self.plan.buffers:
            if b.kind == DEVICE_INPUT:
                spans.append((device_bases[b.id], b))
            elif b.kind == EXTERNAL:
                spans.append((b.address, b))
        if _numba.SIMULATOR:
            for base, b in spans:
                mem[b.id] = host_bytes(base, b.nbytes)
            return []
        copies = []
        spans.sort(key=lambda s: s[0])
        i = 0
        while i < len(spans):
            lo, hi, members = spans[i][0], spans[i][0] + spans[i][1].nbytes, [spans[i]]
            i += 1
            while i < len(spans) and spans[i][0] < hi:
                hi = max(hi, spans[i][0] + spans[i][1].nbytes)
                members.append(spans[i])
                i += 1
            host = _numba.device_bytes(lo, hi - lo).copy_to_host() if hi > lo else \
                np.empty(0, np.uint8)
            for base, b in members:
                mem[b.id] = host[base - lo:base - lo + b.nbytes]
            copies.append(((lo, host), [b.id for _, b in members]))
        return copies

    def _captured(self, mem: dict[int, np.ndarray]) -> dict[int, Any]:
        """On a real GPU, what each captured device array is to simulator kernels that
        name it: a simulator array over this run's copy of its memory."""
        if _numba.SIMULATOR:
            return {}
        out = {}
        for b in self.plan.buffers:
            if b.kind == EXTERNAL and b.external is not None:
                info = describe(b.external)
                assert info is not None  # it was an array when traced
                view = View(b.id, info.ptr - b.address, info.shape, info.strides, info.dtype)
                out[id(b.external)] = _numba.simulator_array(_ndarray(view, mem))
        return out

    def _execute(self, node: Any, mem: dict[int, np.ndarray], captured: dict[int, Any],
                 leaves: list[Any]) -> None:
        op = node.op
        if runs_sim_function(op):
            run_sim_function(op, [_foreign_arg(a, op, mem) for a in _foreign_args(op)])
        elif node.kind == "kernel":
            launch = op.launch
            args = [_kernel_arg(a, mem, ty, leaves) for a, ty in zip(launch.args, node.argtypes)]
            try:
                _numba.run_simulated(launch.kernel, launch.griddim, launch.blockdim,
                                     launch.sharedmem, args, captured, launch.cooperative)
            except _numba.GridSyncError as exc:
                raise LoweringError(f"kernel {op.name} synchronizes the grid through a call "
                                    "tracegraph could not follow, so it was not launched "
                                    "cooperatively", where=op.location,
                                    fix="call the device function that syncs by its own name "
                                        "(from module import fn), so tracing sees it") from exc
            except ValueError as exc:
                if "read-only" not in str(exc):
                    raise
                raise LoweringError(f"kernel {op.name} stores to a read-only array argument "
                                    "(eager Numba refuses to compile that)", where=op.location,
                                    fix="pass a writable array (e.g. a copy), or do not write "
                                        "it in the kernel") from exc
        elif node.kind == "memcpy":
            dst, src = op.copy.dst, op.copy.src
            n = node.nbytes
            mem[dst.buffer][dst.offset:dst.offset + n] = mem[src.buffer][src.offset:src.offset + n]
        elif node.kind == "memset":
            dst = op.fill.dst
            mem[dst.buffer][dst.offset:dst.offset + node.nbytes] = op.fill.value
        elif node.kind == "host":
            try:
                with _numba.in_host_callback():
                    op.host_call.fn()
            except Exception as exc:
                raise TracegraphError(f"host callback {op.name} raised {type(exc).__name__}: "
                                      f"{exc}", where=op.location,
                                      fix="fix the callback; on the GPU it runs on a driver "
                                          "thread while the graph is in flight") from exc
        # event record/wait: the simulator runs nodes one at a time, so order is all there is

    def _output(self, out: Any, leaves: list[Any], mem: dict[int, np.ndarray],
                shared: dict[int, list]) -> Any:
        """A result: views of one result buffer share one copy of it, as on cuda."""
        if out.kind == "static":
            return out.value
        if out.kind == "input":
            return leaves[out.input_index]
        if out.kind == "input view":
            from . import argument_view
            return argument_view(leaves[out.input_index], out)
        v = out.view
        if v.buffer not in shared:
            shared[v.buffer] = [mem[v.buffer].copy(), None]  # [host copy, device copy]
        copies = shared[v.buffer]
        host = _ndarray(v, {v.buffer: copies[0]})
        if out.kind == "host":
            return host
        if _numba.SIMULATOR:
            return _numba.simulator_array(host)  # over the shared host copy
        if any(s < 0 for s in v.strides):
            return _numba.to_device(host.copy())  # as cuda: a copy (docs/sharp-edges.md)
        if copies[1] is None:
            copies[1] = _numba.to_device(copies[0])
        return _numba.device_view(copies[1], v.offset, v.shape, v.strides, v.dtype)


def runs_sim_function(op: Op) -> bool:
    """Foreign work (a library call, a kernel compiled elsewhere): the CPU runs its sim=."""
    return op.kind == OpKind.LIBRARY or (op.kind == OpKind.KERNEL and
                                         isinstance(op.launch.kernel, ForeignKernel))


def _foreign_args(op: Op) -> tuple:
    return op.library.args if op.kind == OpKind.LIBRARY else op.launch.args


def _foreign_arg(a: Any, op: Op, mem: dict[int, np.ndarray]) -> Any:
    if not isinstance(a, View):
        return a
    host = _ndarray(a, mem)
    if not any(x.writes for x in op.accesses if x.buffer == a.buffer):
        host.flags.writeable = False  # declared read only: a sim= that writes it raises
    return host


def sim_function(op: Op) -> Any:
    """What runs a foreign kernel or library call on the CPU: its sim= function."""
    data = op.library if op.kind == OpKind.LIBRARY else op.launch.kernel
    if data.sim is None:
        what = "tg.library call" if op.kind == OpKind.LIBRARY else "foreign kernel"
        raise LoweringError(f"{what} {op.name} has no sim= function, and the simulator "
                            "cannot run foreign code", where=op.location,
                            fix="pass sim=fn, a NumPy function doing the same work on the "
                                "same arguments (NumPy arrays), or run on a GPU")
    return data.sim


def run_sim_function(op: Op, args: list) -> None:
    call_sim(sim_function(op), op.name, op.location, args)


def call_sim(fn: Any, name: str, where: str, args: list) -> None:
    try:
        fn(*args)
    except Exception as exc:
        raise TracegraphError(f"the sim= function of {name} raised {type(exc).__name__}: "
                              f"{exc}", where=where,
                              fix="fix the sim function (arrays it only reads, by the "
                                  "declared reads=/writes=, are read-only)") from exc


def check_sim_functions(nodes: Any) -> None:
    """Refuse, before anything runs, foreign work the simulator has no function for."""
    for node in nodes:
        if runs_sim_function(node.op):
            sim_function(node.op)
        for body in node.bodies:
            check_sim_functions(body)


def _ndarray(v: View, mem: dict[int, np.ndarray]) -> np.ndarray:
    return np.ndarray(v.shape, v.dtype, buffer=mem[v.buffer], offset=v.offset, strides=v.strides)


def _kernel_arg(a: Any, mem: dict[int, np.ndarray], ty: Any, leaves: list[Any]) -> Any:
    if isinstance(a, View):
        host = _ndarray(a, mem)
        if a.readonly:
            host.flags.writeable = False
        return _numba.simulator_array(host)
    if isinstance(a, tuple):
        items = [_kernel_arg(x, mem, t, leaves) for x, t in zip(a, ty)]
        return type(a)(*items) if hasattr(a, "_fields") else tuple(items)
    if isinstance(a, ScalarArg):  # a dynamic scalar: this call's value
        a = leaves[a.leaf]
    return _numba.simulator_scalar(ty, a)  # the parameter's type, as the GPU holds it


def build(plan: Plan, seed: int | None = None) -> SimExecutable:
    return SimExecutable(plan, seed)
