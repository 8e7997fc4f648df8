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
from typing import Any

import numpy as np

from .. import _numba, pytree
from ..arrays import ArrayInfo
from ..ir import DEVICE_INPUT, EXTERNAL, HOST_INPUT, STAGING, TEMP, View
from ..lower import Plan
from . import input_bases

log = logging.getLogger("tracegraph.backends.sim")

_POISON = 0xFF  # fresh graph memory reads as NaN (floats) or -1 (ints): unwritten output shows


def host_bytes(address: int, nbytes: int) -> np.ndarray:
    """A uint8 array over host memory at `address` (no copy; the owner must stay alive)."""
    if nbytes == 0:
        return np.empty(0, np.uint8)
    return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address))


def random_topological_order(plan: Plan, seed: int) -> list[int]:
    rng = random.Random(seed)
    waiting = {n.index: len(n.deps) for n in plan.nodes}
    users: dict[int, list[int]] = {n.index: [] for n in plan.nodes}
    for n in plan.nodes:
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
        self.plan = plan
        self.seed = seed
        self.order = (random_topological_order(plan, seed) if seed is not None
                      else [n.index for n in plan.nodes])
        self.memory = {b.id: np.full(b.nbytes, _POISON, np.uint8) for b in plan.buffers
                       if b.kind in (TEMP, HOST_INPUT, STAGING)}
        self.written = frozenset(a.buffer for n in plan.nodes for a in n.op.accesses
                                 if a.writes)
        self._lock = threading.Lock()

    def run(self, leaves: list[Any], infos: list[ArrayInfo | None], stream: Any = None) -> Any:
        with self._lock:
            return self._run(leaves, infos)

    def _run(self, leaves: list[Any], infos: list[ArrayInfo | None]) -> Any:
        plan = self.plan
        mem = dict(self.memory)
        device_bases, staging_bases = input_bases(plan, infos)
        copied_from_device: dict[int, int] = {}
        for b in plan.buffers:
            if b.kind == DEVICE_INPUT:
                base = device_bases[b.id]
                if _numba.SIMULATOR:
                    mem[b.id] = host_bytes(base, b.nbytes)
                else:  # a real device array, on a machine with a GPU
                    mem[b.id] = _numba.device_bytes(base, b.nbytes).copy_to_host()
                    copied_from_device[b.id] = base
            elif b.kind == EXTERNAL:
                mem[b.id], base = self._external_bytes(b)
                if not _numba.SIMULATOR:
                    copied_from_device[b.id] = base
        for staging, base in staging_bases.items():
            ctypes.memmove(mem[staging].ctypes.data, base, plan.buffers[staging].nbytes)

        for i in self.order:
            node = plan.nodes[i]
            try:
                self._execute(node, mem)
            except Exception as exc:
                if hasattr(exc, "add_note"):
                    exc.add_note(f"while executing graph node {i}: {node.describe()}")
                raise

        for inp in plan.inputs:
            if inp.kind == "array" and inp.written and inp.staging is not None:
                ctypes.memmove(staging_bases[inp.staging], mem[inp.staging].ctypes.data,
                               plan.buffers[inp.staging].nbytes)
        for buffer, base in copied_from_device.items():
            if buffer in self.written:  # a caller's or captured device array
                _numba.device_bytes(base, plan.buffers[buffer].nbytes).copy_to_device(mem[buffer])
        return pytree.unflatten(plan.output_tree,
                                [self._output(o, leaves, mem) for o in plan.outputs])

    def _external_bytes(self, buffer: Any) -> tuple[np.ndarray, int]:
        """A captured device array's bytes (a host copy on a real GPU) and its address."""
        from ..arrays import describe
        info = describe(buffer.external)
        lo, _ = info.extent
        if _numba.SIMULATOR:
            return host_bytes(lo, buffer.nbytes), lo
        return _numba.device_bytes(lo, buffer.nbytes).copy_to_host(), lo

    def _execute(self, node: Any, mem: dict[int, np.ndarray]) -> None:
        op = node.op
        if node.kind == "kernel":
            args = [_kernel_arg(a, mem) for a in op.args]
            _numba.run_simulated(op.kernel, op.griddim, op.blockdim, op.sharedmem, args)
        elif node.kind == "memcpy":
            dst, src = op.args
            n = node.nbytes
            mem[dst.buffer][dst.offset:dst.offset + n] = mem[src.buffer][src.offset:src.offset + n]
        elif node.kind == "memset":
            (dst,) = op.args
            mem[dst.buffer][dst.offset:dst.offset + node.nbytes] = op.payload
        elif node.kind == "host":
            op.payload()
        # event record/wait: the simulator runs nodes one at a time, so order is all there is

    def _output(self, out: Any, leaves: list[Any], mem: dict[int, np.ndarray]) -> Any:
        if out.kind == "static":
            return out.value
        if out.kind == "input":
            return leaves[out.input_index]
        host = _ndarray(out.view, mem).copy()
        return host if out.kind == "host" else _numba.to_device(host)


def _ndarray(v: View, mem: dict[int, np.ndarray]) -> np.ndarray:
    return np.ndarray(v.shape, v.dtype, buffer=mem[v.buffer], offset=v.offset, strides=v.strides)


def _kernel_arg(a: Any, mem: dict[int, np.ndarray]) -> Any:
    if isinstance(a, View):
        return _numba.simulator_array(_ndarray(a, mem))
    if isinstance(a, tuple):
        return tuple(_kernel_arg(x, mem) for x in a)
    return a


def build(plan: Plan, seed: int | None = None) -> SimExecutable:
    return SimExecutable(plan, seed)
