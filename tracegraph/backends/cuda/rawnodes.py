"""Graph nodes and executables the driver makes for us (cuda.bindings) where cuda.core's
would cost every launch: kernel, host-callback and event nodes, edges, instantiation.

Why: cuda.core keeps what a kernel node uses alive by retaining a user object on its
graph, and the driver pays for a retained user object on every launch of the executable
(measured on an H100: a one-kernel graph 1.5-1.7 us per launch bare, 2.3-3.1 us with one
user object); cuda.core's instantiate costs another 0.6 us a launch (1.91 against
1.34 us). Here the
Python side keeps what the nodes use alive instead: the executable holds the builder (its
compiled kernels), the plan (events, callbacks) and `RawNode.keep`.

Nodes are made at the root of their graph and joined by edges added in one call per
graph (cuGraphAddDependencies), so a node of any kind may follow a node of any other.
"""
from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable, Sequence
from typing import Any

from .handles import check, ctype_value, driver, event_handle


class RawNode:
    """A node made through the driver: its handle (what cuda.core's nodes call `handle`),
    and what must live as long as the graph holding it."""

    __slots__ = ("handle", "keep")

    def __init__(self, handle: Any, keep: Any = None):
        self.handle, self.keep = handle, keep

    def __repr__(self) -> str:
        return f"<RawNode {int(self.handle):#x}>"


class CuFunction:
    """A foreign kernel given as a raw CUfunction (CuPy's RawKernel)."""

    __slots__ = ("handle",)

    def __init__(self, handle: int):
        self.handle = handle


# (CUkernel, CUcontext) -> (the kernel, kept so its handle is never reused; its CUfunction)
_functions: dict[tuple[int, int], tuple[Any, Any]] = {}


def function_of(kernel: Any) -> Any:
    """The CUfunction a kernel node launches: a cuda.core Kernel's (a library kernel) in
    the current context, or a raw CUfunction as given."""
    drv = driver()
    if isinstance(kernel, CuFunction):
        return drv.CUfunction(kernel.handle)
    err, ctx = drv.cuCtxGetCurrent()
    check(err, "cuCtxGetCurrent")
    key = (int(kernel.handle), int(ctx))
    found = _functions.get(key)
    if found is None:
        err, function = drv.cuKernelGetFunction(kernel.handle)
        check(err, "cuKernelGetFunction")
        found = _functions[key] = (kernel, function)
    return found[1]


def add_kernel(graph: Any, grid: tuple, block: tuple, sharedmem: int, kernel: Any,
               args: Sequence[Any]) -> RawNode:
    """A kernel node at the root of `graph` (cuGraphAddKernelNode; the driver copies the
    parameter values now)."""
    # (the values and pointer array the struct points into must outlive the call: a
    # struct alone let them be freed first, INVALID_VALUE or a crash on a GPU)
    p, values, pointers = _node_params(grid, block, sharedmem, kernel, args)
    err, node = driver().cuGraphAddKernelNode(graph.handle, None, 0, p)
    del values, pointers
    check(err, "cuGraphAddKernelNode")
    return RawNode(node, kernel)


def _node_params(grid: tuple, block: tuple, sharedmem: int, kernel: Any,
                 args: Sequence[Any]) -> tuple:
    """(CUDA_KERNEL_NODE_PARAMS, and the ctypes storage its kernelParams point into, to
    keep alive while it is used)."""
    drv = driver()
    values = [ctype_value(a) for a in args]
    pointers = (ctypes.c_void_p * max(len(values), 1))(*[ctypes.addressof(v) for v in values])
    p = drv.CUDA_KERNEL_NODE_PARAMS()
    p.func = function_of(kernel)
    p.gridDimX, p.gridDimY, p.gridDimZ = (int(v) for v in grid)
    p.blockDimX, p.blockDimY, p.blockDimZ = (int(v) for v in block)
    p.sharedMemBytes = int(sharedmem)
    p.kernelParams = ctypes.addressof(pointers)
    return p, values, pointers


def add_kernels(graph: Any, launches: Sequence[tuple], batch: Callable | None) -> list[RawNode]:
    """Kernel nodes at the root of `graph`, one per (grid, block, sharedmem, kernel, args),
    made in one call of the C helper's `batch` (add_kernel_nodes) where it is built: their
    parameter values packed once per distinct `args` object (a kernel launched again with
    the same arguments shares one), the function looked up once per kernel."""
    specs = None if batch is None else _specs(launches)
    if batch is not None and specs is not None:
        handles = batch(int(graph.handle), specs)
        if handles is not NotImplemented:
            node_type = driver().CUgraphNode
            return [RawNode(node_type(h), launch[3]) for h, launch in zip(handles, launches)]
    # one cuda.bindings call a node, its parameter struct made once per kernel,
    # configuration and shared argument tuple (the driver copies it at each call)
    drv = driver()
    structs: dict[tuple, Any] = {}
    made = []
    for grid, block, sharedmem, kernel, args in launches:
        key = (id(kernel), grid, block, sharedmem, id(args))
        struct = structs.get(key)
        if struct is None:
            struct = structs[key] = _node_params(grid, block, sharedmem, kernel, args)
        err, node = drv.cuGraphAddKernelNode(graph.handle, None, 0, struct[0])
        check(err, "cuGraphAddKernelNode")
        made.append(RawNode(node, kernel))
    return made


def _specs(launches: Sequence[tuple]) -> list[tuple] | None:
    functions: dict[int, int] = {}
    packed: dict[int, Any] = {}
    specs = []
    for grid, block, sharedmem, kernel, args in launches:
        values = packed.get(id(args), False)
        if values is False:
            values = packed[id(args)] = pack_values(args)
        if values is None or not fits_batch(values):
            return None  # a value the packing does not know, or too many: per node
        function = functions.get(id(kernel))
        if function is None:
            function = functions[id(kernel)] = int(function_of(kernel))
        gx, gy, gz = grid
        bx, by, bz = block
        specs.append((function, gx, gy, gz, bx, by, bz, sharedmem, *values))
    return specs


# the room add_kernel_nodes has for one node's parameters (_graphlaunch.c): a kernel with
# more (nine 2-D arrays are 81 parameters; CUDA allows 4 KiB and more) goes per node
BATCH_MAX_PARAMETERS, BATCH_MAX_BYTES = 64, 1024


def fits_batch(packed: tuple[bytes, tuple[int, ...]]) -> bool:
    """Do pack_values' (values, offsets) fit add_kernel_nodes' room for one node?"""
    values, offsets = packed
    return len(offsets) <= BATCH_MAX_PARAMETERS and len(values) <= BATCH_MAX_BYTES


# struct codes of the ctypes scalars a kernel parameter may be (their `_type_`)
_STRUCT_CODES = frozenset("bBhHiIlLqQfd?")
_layouts: dict[str, tuple[struct.Struct, tuple[int, ...]]] = {}


def pack_values(args: Sequence[Any]) -> tuple[bytes, tuple[int, ...]] | None:
    """Kernel parameter values as one native-aligned block and each one's offset in it,
    as ctype_value stores them one by one (ints as 8 bytes); None for a value it cannot."""
    codes: list[str] = []
    values: list[Any] = []
    for a in args:
        if type(a) is bool:
            codes.append("?")
            values.append(a)
        elif type(a) is int:
            codes.append("q" if -(2**63) <= a < 2**63 else "Q")
            values.append(a)
        elif isinstance(a, ctypes._SimpleCData):
            code = getattr(type(a), "_type_", "")
            if code not in _STRUCT_CODES:
                return None
            codes.append(code)
            values.append(a.value)
        else:
            handle = getattr(a, "handle", None)  # cuda.core's GraphCondition
            if handle is None:
                return None
            codes.append("Q")
            values.append(int(handle))
    key = "".join(codes)
    layout = _layouts.get(key)
    if layout is None:
        whole = struct.Struct("@" + key)
        offsets = tuple(struct.calcsize("@" + key[:i + 1]) - struct.calcsize("@" + key[i])
                        for i in range(len(key)))
        layout = _layouts[key] = (whole, offsets)
    try:
        return layout[0].pack(*values), layout[1]
    except struct.error:
        return None


def add_host(graph: Any, fn: Callable[[], None]) -> RawNode:
    """A host-callback node at the root of `graph`, calling `fn` (through a ctypes
    function pointer, which takes the GIL; kept alive with the node)."""
    drv = driver()
    trampoline = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda _: fn())
    p = drv.CUDA_HOST_NODE_PARAMS()
    p.fn = drv.CUhostFn(ctypes.cast(trampoline, ctypes.c_void_p).value)
    p.userData = 0
    err, node = drv.cuGraphAddHostNode(graph.handle, None, 0, p)
    check(err, "cuGraphAddHostNode")
    return RawNode(node, trampoline)


def add_event(graph: Any, record: bool, event: Any) -> RawNode:
    """An event record or wait node at the root of `graph`, on the caller's event (a
    cuda.core, Numba, CuPy or PyTorch one)."""
    drv = driver()
    handle = drv.CUevent(event_handle(event))
    if record:
        err, node = drv.cuGraphAddEventRecordNode(graph.handle, None, 0, handle)
        check(err, "cuGraphAddEventRecordNode")
    else:
        err, node = drv.cuGraphAddEventWaitNode(graph.handle, None, 0, handle)
        check(err, "cuGraphAddEventWaitNode")
    return RawNode(node, event)


def add_edges(graph: Any, edges: Sequence[tuple[Any, Any]]) -> None:
    """Edges (from, to) between nodes of `graph`, cuda.core's or ours, in one call."""
    if not edges:
        return
    drv = driver()
    sources = [_node_handle(a) for a, _ in edges]
    targets = [_node_handle(b) for _, b in edges]
    (err,) = drv.cuGraphAddDependencies(graph.handle, sources, targets, None, len(edges))
    check(err, "cuGraphAddDependencies")


def _node_handle(node: Any) -> Any:
    handle = node.handle
    node_type = driver().CUgraphNode
    return handle if isinstance(handle, node_type) else node_type(int(handle))


class Executable:
    """A graph instantiated by the driver (cuGraphInstantiate), with the part of cuda.core's
    Graph the backend uses. cuda.core's own instantiate makes every launch dearer: one
    kernel node, H100, host time per launch 1.91 us against 1.34 through the driver (and
    CuPy's 1.31)."""

    def __init__(self, gdef: Any, use_priority: bool = False):
        drv = driver()
        flags = (int(drv.CUgraphInstantiate_flags.CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)
                 if use_priority else 0)
        err, self.handle = drv.cuGraphInstantiate(gdef.handle, flags)
        check(err, "cuGraphInstantiate")
        self.is_closed = False

    def launch(self, stream: Any) -> None:
        (err,) = driver().cuGraphLaunch(self.handle, _stream(stream))
        check(err, "cuGraphLaunch")

    def launcher(self, stream: Any) -> Callable[[], None]:
        """A call launching this graph on `stream`, its handles made once (the replay path
        where the C helper is not built)."""
        launch, handle, raw = driver().cuGraphLaunch, self.handle, _stream(stream)

        def go() -> None:
            (err,) = launch(handle, raw)
            if int(err) != 0:
                check(err, "cuGraphLaunch")
        return go

    def upload(self, stream: Any) -> None:
        (err,) = driver().cuGraphUpload(self.handle, _stream(stream))
        check(err, "cuGraphUpload")

    def update(self, gdef: Any) -> None:
        """Take `gdef`'s parameters (the same topology), as cuda.core's Graph.update."""
        err, info = driver().cuGraphExecUpdate(self.handle, gdef.handle)
        if int(err) != 0:
            raise RuntimeError(f"cuGraphExecUpdate returned {err.name} "
                               f"({getattr(info, 'result', '?')!r})")

    def __getitem__(self, node: Any) -> ExecutableNode:
        return ExecutableNode(self, node)

    def close(self) -> None:
        if not self.is_closed:
            self.is_closed = True
            (err,) = driver().cuGraphExecDestroy(self.handle)
            check(err, "cuGraphExecDestroy")

    def __del__(self) -> None:
        # an executable dropped unclosed (as cuda.core's Graph does on collection): its
        # device memory goes back; the driver may be gone at interpreter exit
        if not getattr(self, "is_closed", True):
            try:
                self.close()
            except Exception:
                pass


class ExecutableNode:
    """graph[node]: a memcpy or memset node of an executable, its parameters set in place
    (cuGraphExecMemcpyNodeSetParams / cuGraphExecMemsetNodeSetParams) from the node's own
    (cuda.core chose its memory types; an update must keep them)."""

    def __init__(self, graph: Executable, node: Any):
        self.graph, self.node = graph, _node_handle(node)
        self._params: Any = None  # the node's own, read once (replay.py keeps this view)
        self._ctx: Any = None

    def update(self, **p: Any) -> None:
        drv = driver()
        if self._params is None:
            err, self._ctx = drv.cuCtxGetCurrent()
            check(err, "cuCtxGetCurrent")
            get = drv.cuGraphMemcpyNodeGetParams if "src" in p else drv.cuGraphMemsetNodeGetParams
            err, self._params = get(self.node)
            check(err, "cuGraph*NodeGetParams")
        ctx = self._ctx
        if "src" in p:
            c = self._params
            host = drv.CUmemorytype.CU_MEMORYTYPE_HOST
            if c.srcMemoryType == host:
                c.srcHost = int(p["src"])
            else:
                c.srcDevice = int(p["src"])
            if c.dstMemoryType == host:
                c.dstHost = int(p["dst"])
            else:
                c.dstDevice = int(p["dst"])
            c.WidthInBytes = int(p["size"])
            (err,) = drv.cuGraphExecMemcpyNodeSetParams(self.graph.handle, self.node, c, ctx)
            check(err, "cuGraphExecMemcpyNodeSetParams")
            return
        m = self._params
        m.dst, m.value, m.width = int(p["dst"]), int(p["value"]), int(p["width"])
        (err,) = drv.cuGraphExecMemsetNodeSetParams(self.graph.handle, self.node, m, ctx)
        check(err, "cuGraphExecMemsetNodeSetParams")


def _stream(stream: Any) -> Any:
    return driver().CUstream(int(getattr(stream, "handle", stream) or 0))
