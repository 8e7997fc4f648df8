"""A CPU stand-in for the cuda backend's Platform, so that its build, re-pointing,
moved-input policy, result ring and write-back run in CI without a GPU
(TRACEGRAPH_CUDA_PLATFORM=fake, under Numba's simulator).

"Device" memory is host memory. A graph definition records nodes, their parameters and
edges as cuda.core's does; instantiating snapshots them (so, as with a real executable,
changing the definition afterwards changes nothing); launching runs the snapshot's nodes
in a valid order that is not program order (a missing edge shows), kernels on the
simulator with their arguments rebuilt from the flattened parameters they were given
(the addresses the backend resolved: a stale pointer reads stale memory). Executable
updates follow cuda.core's rules (an empty node refuses them). Counters say what the
backend asked for, so tests can check the cost of a replay.
"""
from __future__ import annotations

import ctypes
import functools
import random
import sys
import threading
import weakref
from collections import Counter
from typing import Any

import numpy as np

from ... import _numba, config
from ...device_memory import MemoryExhausted
from ...errors import LoweringError
from ...ir import ForeignKernel
from ..sim import call_sim, sim_function
from .fake_graph import (
    FakeCondition,
    FakeExecView,
    FakeGraph,
    FakeGraphDefinition,
    FakeKernelPatch,
    FakeNode,
    FakeStream,
)

__all__ = ["FakeCondition", "FakeExecView", "FakeForeign", "FakeGraph", "FakeGraphDefinition",
           "FakeHelper", "FakeKernel", "FakeKernelPatch", "FakeNode", "FakePlatform",
           "FakeStream"]


class FakeKernel:
    def __init__(self, kernel: Any, argtypes: tuple):
        self.kernel, self.argtypes = kernel, argtypes


class FakePlatform:
    """The Platform of platform.py, on the CPU."""

    def __init__(self, device_id: int = 0) -> None:
        if not _numba.SIMULATOR:
            raise RuntimeError("the fake CUDA platform runs under NUMBA_ENABLE_CUDASIM=1")
        self.device_id = device_id
        self.stream_order = threading.RLock()  # this device's one stream (fake_graph.py)
        self.counts: Counter[str] = Counter()
        self._memory: list[np.ndarray] = []
        self.live = 0  # bytes of "device" memory allocated and not yet freed
        seed = config.sim_order_seed()
        self._rng = random.Random(seed) if seed is not None else None

    # -- what the backend asks for -----------------------------------------------
    def set_current(self) -> None:
        pass

    def new_graph(self) -> FakeGraphDefinition:
        return FakeGraphDefinition(self)

    def baked_arrays(self, kernel: Any, argtypes: tuple) -> list[Any]:  # noqa: ARG002
        """The simulator compiles nothing in: a kernel reads its globals when it runs."""
        return []

    def compile(self, kernel: Any, argtypes: tuple) -> tuple[Any, bool]:
        if isinstance(kernel, ForeignKernel):
            if kernel.sim is None:
                raise LoweringError(f"foreign kernel {kernel.name} has no sim= function, and "
                                    "the CPU stand-in cannot run foreign code",
                                    fix="pass sim=fn doing the same work on NumPy arrays")
            return FakeForeign(kernel, argtypes), False
        return FakeKernel(kernel, argtypes), _numba.uses_grid_sync(kernel)

    # an H100's memory: an allocation that does not fit in what is left fails, as the
    # driver's does (tests lower it to make allocations fail)
    capacity = 80 * 2**30

    def alloc_device(self, nbytes: int) -> np.ndarray:
        self.counts["alloc_device"] += 1
        n = max(nbytes, 1)
        if n > self.capacity - self.live:
            raise MemoryExhausted(nbytes, "device", max(self.capacity - self.live, 0),
                                  self.capacity)
        memory = np.full(n, 0xFF, np.uint8)  # poisoned, as sim's memory
        self.live += n
        weakref.finalize(memory, self._freed, n)
        return memory

    def _freed(self, nbytes: int) -> None:
        self.live -= nbytes

    def alloc_pinned(self, nbytes: int) -> np.ndarray:
        self.counts["alloc_pinned"] += 1
        return np.full(max(nbytes, 1), 0xFF, np.uint8)

    def address(self, owner: Any) -> int:
        return int(owner.ctypes.data)

    def holders(self, owner: Any) -> int:
        return sys.getrefcount(owner)

    def device_view(self, owner: Any, offset: int, shape: tuple, strides: tuple,
                    dtype: np.dtype) -> Any:
        host = np.ndarray(shape, dtype, buffer=owner, offset=offset, strides=strides)
        return _numba.simulator_array(host)

    def stream(self, user_stream: Any) -> FakeStream:  # noqa: ARG002 - the Platform interface
        return self._stream

    _stream = FakeStream()

    def graph_launcher(self, graph: Any, stream: Any) -> Any:
        self.counts["graph_launcher"] += 1
        return functools.partial(graph.launch, stream)

    def fast_replay(self) -> Any:
        return None  # the C helper launches real executables only (tested on its own)

    def synchronize(self) -> None:
        self.counts["synchronize"] += 1

    def is_pinned(self, address: int, nbytes: int) -> bool:  # noqa: ARG002 - the Platform interface
        return False  # the caller's NumPy memory is pageable here: staged

    def kernel_patch(self, graph: FakeGraph, node: FakeNode, args: list) -> FakeKernelPatch:
        return FakeKernelPatch(graph, node, args)

    def add_kernel(self, graph: FakeGraphDefinition, grid: tuple, block: tuple,
                   sharedmem: int, kernel: Any, args: list) -> FakeNode:
        # the driver copies the parameter values now, as rawnodes.add_kernel
        return graph.node("kernel", {"config": (grid, block, sharedmem), "kernel": kernel,
                                     "args": list(args), "cooperative": False})

    def add_kernels(self, graph: FakeGraphDefinition, launches: list[tuple]) -> list[FakeNode]:
        self.counts["add_kernels"] += 1
        return [self.add_kernel(graph, *launch) for launch in launches]

    def add_host(self, graph: FakeGraphDefinition, fn: Any) -> FakeNode:
        return graph.node("host", {"fn": fn})

    def add_event(self, graph: FakeGraphDefinition, record: bool, event: Any) -> FakeNode:
        return graph.node("event_record" if record else "event_wait", {"event": event})

    def add_edges(self, graph: FakeGraphDefinition, edges: list) -> None:
        graph.add_edges(edges)

    def set_cooperative(self, node: FakeNode) -> None:
        node.params["cooperative"] = True

    # the co-residency limit of a cooperative grid on the stand-in (tests lower it)
    cooperative_blocks = 132 * 16

    def set_priority(self, node: FakeNode, priority: int) -> None:
        node.params["priority"] = max(-5, min(0, int(priority)))  # the H200's range

    def set_access_policy(self, node: FakeNode, address: int, nbytes: int,
                          hit_ratio: float) -> None:
        node.params["access_policy"] = (address, nbytes, hit_ratio)

    def instantiate(self, gdef: FakeGraphDefinition, use_priority: bool) -> FakeGraph:
        return gdef.instantiate("use_node_priority" if use_priority else None)

    def capture_library(self, node: Any, args: list, warm: bool = True) -> Any:  # noqa: ARG002
        """The call as a one-node child graph that runs its sim= function on the memory at
        the addresses it was given."""
        self.counts["capture_library"] += 1
        fn = sim_function(node.op)
        gdef = FakeGraphDefinition(self)

        def run() -> None:
            arrays = [_host_at(a[0], a[1].shape, a[1].strides, a[1].dtype, not a[2])
                      if isinstance(a, tuple) else a for a in args]
            call_sim(fn, node.name, node.location, arrays)
        gdef.node("library", {"run": run})
        return _FakeCaptured(gdef)

    def set_child_graph(self, graph: Any, node: Any, gdef: Any) -> None:
        """cuGraphExecChildGraphNodeSetParams: the executable's child node runs gdef."""
        from .fake_graph import FakeGraph
        self.counts["set_child_graph"] += 1
        graph.params[node.handle]["child"] = FakeGraph(self, gdef)

    def cooperative_grid_limit(self, kernel: Any, argtypes: tuple, block: tuple,  # noqa: ARG002
                               sharedmem: int) -> int:  # noqa: ARG002
        return self.cooperative_blocks

    def dot(self, gdef: FakeGraphDefinition) -> str:
        import os
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "g.dot")
            gdef.debug_dot_print(path)
            with open(path) as f:
                return f.read()

    # -- running ------------------------------------------------------------------
    def order(self, preds: list[list[int]]) -> list[int]:
        """A valid order: random under TRACEGRAPH_SIM_ORDER, else always the most
        recently readied node first (not program order, so a missing edge shows)."""
        waiting = [len(p) for p in preds]
        users: list[list[int]] = [[] for _ in preds]
        for i, p in enumerate(preds):
            for d in p:
                users[d].append(i)
        ready = [i for i, w in enumerate(waiting) if w == 0]
        out = []
        while ready:
            i = ready.pop(self._rng.randrange(len(ready)) if self._rng else -1)
            out.append(i)
            for u in users[i]:
                waiting[u] -= 1
                if waiting[u] == 0:
                    ready.append(u)
        return out

    def condition_helper(self, name: str) -> FakeHelper:
        return FakeHelper(name)

    def read_bytes(self, address: int, nbytes: int) -> np.ndarray:
        return np.frombuffer(memoryview((ctypes.c_uint8 * nbytes).from_address(address)),
                             np.uint8).copy()

    def run_node(self, kind: str, p: dict) -> None:
        if kind in ("while", "if", "switch"):
            self._run_conditional(kind, p)
        elif kind == "kernel" and isinstance(p["kernel"], (FakeHelper, FakeForeign)):
            p["kernel"].run(p["args"])
        elif kind == "kernel":
            kernel = p["kernel"]
            grid, block, sharedmem = p["config"]
            args = _numba.unflatten_params(kernel.argtypes, p["args"], _array_at)
            args = [_numba.simulator_scalar(t, a) for t, a in zip(kernel.argtypes, args)]
            _numba.run_simulated(kernel.kernel, grid, block, sharedmem, args,
                                 cooperative=p["cooperative"])
        elif kind == "memcpy":
            ctypes.memmove(p["dst"], p["src"], p["size"])
        elif kind == "memset":
            ctypes.memset(p["dst"], p["value"], p["width"])
        elif kind == "host":
            with _numba.in_host_callback():
                p["fn"]()
        elif kind == "graph":
            p["child"].launch(None)
        elif kind == "library":
            p["run"]()

    def _run_conditional(self, kind: str, p: dict) -> None:
        cond, bodies = p["cond"], p["bodies"]
        if kind == "while":
            spins = 0
            while cond.value:
                bodies[0].launch(None)
                spins += 1
                if spins > 1 << 20:
                    raise RuntimeError("a fake while loop ran a million times")
        elif kind == "if":
            if cond.value:
                bodies[0].launch(None)
            elif len(bodies) > 1:
                bodies[1].launch(None)
        elif 0 <= cond.value < len(bodies):
            bodies[cond.value].launch(None)


class FakeHelper:
    """A condition-setting helper kernel (platform.CONDITION_SOURCE), run on the host."""

    def __init__(self, name: str):
        self.name = name

    def run(self, args: list) -> None:
        cond, flag_address = args[0], int(args[1])
        kind = np.int64 if self.name.endswith("i64") else np.int32
        flag = int(np.frombuffer(memoryview((ctypes.c_uint8 * 8).from_address(flag_address)),
                                 kind, 1)[0])
        if self.name.startswith("tg_while"):
            counter = np.frombuffer(memoryview((ctypes.c_uint8 * 4).from_address(int(args[2]))),
                                    np.int32, 1)
            limit = args[3].value
            counter[0] = 0 if "start" in self.name else counter[0] + 1
            cond.value = int(flag != 0 and counter[0] < limit)
        elif self.name.startswith("tg_if"):
            cond.value = int(flag != 0)
        else:
            cond.value = flag if flag >= 0 else 0xFFFFFFFF


class FakeForeign:
    """A foreign kernel on the stand-in: its sim= function on the memory its pointer
    parameters point at (arrays it only reads read-only)."""

    def __init__(self, kernel: ForeignKernel, described: tuple):
        self.kernel, self.described = kernel, described

    def run(self, args: list) -> None:
        values = []
        for d, a in zip(self.described, args):
            if d[0] == "array":
                values.append(_host_at(_value(a), d[1], d[2], d[3], not d[4]))
            else:
                values.append(d[1].type(_value(a)))
        call_sim(self.kernel.sim, self.kernel.name, "", values)


class _FakeCaptured:
    def __init__(self, gdef: FakeGraphDefinition):
        self.graph_definition = gdef


def _value(a: Any) -> Any:
    return a.value if hasattr(a, "value") else a


def _host_at(address: int, shape: tuple, strides: tuple, dtype: np.dtype,
             readonly: bool) -> np.ndarray:
    host = _numba.simulated_device_array_host(_array_at(address, shape, strides, dtype))
    if readonly:
        host = host.view()
        host.flags.writeable = False
    return host


def _array_at(address: int, shape: tuple, strides: tuple, dtype: np.dtype,
              readonly: bool = False) -> Any:
    """A simulator array over host memory at `address` (element 0) with these strides."""
    if 0 in shape:
        return _numba.simulator_array(np.empty(shape, dtype))
    lo = hi = 0
    for n, s in zip(shape, strides):
        step = (n - 1) * s
        lo, hi = (lo + step, hi) if step < 0 else (lo, hi + step)
    span = (ctypes.c_uint8 * (hi - lo + dtype.itemsize)).from_address(address + lo)
    host = np.ndarray(shape, dtype, buffer=memoryview(span), offset=-lo, strides=strides)
    if readonly:  # compiled for a read-only array: a store fails, as Numba's typing does
        host.flags.writeable = False
    return _numba.simulator_array(host)
