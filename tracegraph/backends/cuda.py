"""Plan -> explicit CUDA graph, instantiated once, replayed with one launch.

With cuda_handles.py, the only code that calls the CUDA driver. Nodes are built one by
one with cuda.core's GraphDefinition (no stream capture); cuda.bindings is used where
cuda.core has no API (event nodes on foreign events, page-locked memory queries) or
measured slower on the replay path (re-pointing a kernel node: 22 us through cuda.core's
node update, about 2 us through cuGraphExecKernelNodeSetParams on ctypes storage we own;
launching measured the same both ways, 3.2 vs 3.4 us, so cuda.core launches; re-pointing
a memcpy node measured 1.2 us through cuda.core and 2.2 us through the driver's
CUDA_MEMCPY3D, so memcpy nodes go through cuda.core).

Replay does, per call: compare each device input's address with the last one and, only
when it moved, re-point the nodes that use it (or, for an input used by many nodes that
keeps moving, the in-graph copy into a static buffer those nodes use instead:
moved_inputs.py decides per input from measured costs, and the graph is rebuilt when an
input changes way); copy pageable NumPy inputs into
pinned staging (page-locked ones are copied by the graph directly); move a result
buffer the caller still holds to a free allocation; launch; for NumPy results,
synchronize and hand back views of pinned memory.
"""
from __future__ import annotations

import ctypes
import logging
import os
import sys
import tempfile
import threading
from typing import Any

import numpy as np
from numba import cuda

from .. import _numba, config, pytree
from ..signature.arguments import ArrayInfo, describe
from ..errors import CudaError, LoweringError, TracegraphError
from ..ir import DEVICE_INPUT, EXTERNAL, HOST_CONSTANT, HOST_INPUT, STAGING, TEMP
from ..lower import CScalar, Plan, PlanNode, Ptr
from . import cuda_handles as handles
from .moved_inputs import WatchedInput, watched_inputs
from .sim import host_constant_bytes

log = logging.getLogger("tracegraph.backends.cuda")
# A 4-byte memcpy in front of the roots and one after the sinks of a graph with parallel
# branches. On an H200 this ran graphs of 4 to 128 independent kernels 1.6-5.4x faster and
# 8 chains of 16 kernels 1.2-1.3x faster on the GPU; a memcpy at one end only was erratic,
# empty nodes at both ends changed nothing (scripts/probe_memcpy_node_effect.py;
# docs/performance.md). Chains get none: there it cost about 2 us.
BRACKET = True
_thread = threading.local()  # the device made current on this thread


def _core() -> Any:
    import cuda.core as core
    return core


def _error_name(exc: BaseException) -> str:
    text = str(exc)
    for word in text.replace(":", " ").replace(",", " ").split():
        if word.startswith("CUDA_ERROR_") or word.startswith("cudaError"):
            return word
    return type(exc).__name__


# ---------------------------------------------------------------------------
# the executable

class CudaExecutable:
    """One compiled signature: an instantiated graph plus the memory it uses."""

    backend = "cuda"

    def __init__(self, plan: Plan, infos: list | None = None):
        self.plan = plan
        core = _core()
        self.device = core.Device()
        self.device.set_current()
        self._lock = threading.Lock()
        self._callback_errors: list[BaseException] = []
        self._owners: dict[int, Any] = {}      # buffer -> the allocation (or captured array)
        self._base: dict[int, int] = {}        # buffer -> address of its byte 0
        self._allocate(infos)
        self._compiled: dict[tuple, tuple[Any, bool]] = {}
        self._launch_configs: dict[tuple, Any] = {}
        self._watch = watched_inputs(plan, self._base, config.moved_inputs_mode())
        self._scratch = cuda.device_array(64, np.uint8)  # what the bracket copies move
        self.graph: Any = None
        self._build()
        self._slots = self._slot_table()
        # result buffers: the allocations each rotates through (a held result is never
        # overwritten) and, for device ones, Numba's count of holders when we alone hold it
        self._ring: dict[int, list[Any]] = {b: [self._owners[b]] for b in self._result_buffers()}
        self._free_refs = {id(o): _numba.allocation_refs(o) for b, ring in self._ring.items()
                           if plan.buffers[b].kind == TEMP for o in ring}
        # what each replay does, precomputed: (leaf, buffer, view offset[, bytes])
        first = {}
        for inp in plan.inputs:
            if inp.kind == "array":
                first.setdefault(inp.buffer, inp)
        self._device_inputs = [(i.index, b, i.view.offset) for b, i in first.items()
                               if i.staging is None and b not in self._watch]
        self._watched_inputs = [(i.index, b, i.view.offset, self._watch[b])
                                for b, i in first.items() if b in self._watch]
        host = [i for i in first.values() if i.staging is not None]
        self._host_inputs = [self._host_entry(i) for i in host]
        self._own_staging = {i.staging: self._base[i.staging] for i in host}
        # NumPy inputs: the next call refills pinned staging (or the caller may reuse a
        # page-locked array), so the graph must have read them before this call returns
        self._constants = [(self._owners[b.id], b) for b in plan.buffers
                           if b.kind == HOST_CONSTANT]
        self._needs_sync = bool(self._host_inputs or self._constants) or \
            any(o.kind == "host" for o in plan.outputs)
        self._single_output = plan.outputs[0] if plan.output_tree.is_leaf() else None
        self._default_stream = handles.core_stream(0)


    def _host_entry(self, first: Any) -> tuple:
        """(leaf, staging, view offset, bytes, may copy straight from/to the caller's
        page-locked memory, [(leaf, view)] whose elements are written back)."""
        group = [i for i in self.plan.inputs if i.kind == "array" and i.buffer == first.buffer]
        back = [(i.index, i.view) for i in group if i.writes_back]
        # the graph's write-back copies the whole span: only where it has no gaps and no
        # read-only bytes
        direct = not back or all(_numba.layout_of(i.view.shape, i.view.strides, i.view.itemsize)
                                 in "CF" and not i.view.readonly for i in group)
        return (first.index, first.staging, first.view.offset,
                self.plan.buffers[first.staging].nbytes, direct, back)

    # -- memory ---------------------------------------------------------------
    def _allocate(self, infos: list | None) -> None:
        first_call = {}
        if infos is not None:
            for inp in self.plan.inputs:
                if inp.kind == "array" and inp.staging is None:
                    first_call.setdefault(inp.buffer, infos[inp.index].ptr - inp.view.offset)
        for b in self.plan.buffers:
            if b.kind in (TEMP, HOST_INPUT):
                owner = cuda.device_array(max(b.nbytes, 1), np.uint8)
                self._owners[b.id] = owner
                self._base[b.id] = _numba.device_address(owner)
            elif b.kind in (STAGING, HOST_CONSTANT):
                owner = cuda.pinned_array(max(b.nbytes, 1), np.uint8)
                self._owners[b.id] = owner
                self._base[b.id] = owner.ctypes.data
            elif b.kind == EXTERNAL:
                info = describe(b.external)
                self._owners[b.id] = b.external
                self._base[b.id] = info.extent[0]
            elif b.kind == DEVICE_INPUT:  # the compiling call's array; re-pointed on replay
                self._base[b.id] = first_call.get(b.id, 0)

    def _result_buffers(self) -> list[int]:
        """Graph memory handed to the caller as results: device temps and pinned staging."""
        return sorted({o.view.buffer for o in self.plan.outputs
                       if (o.kind == "device" and self.plan.buffers[o.view.buffer].kind == TEMP)
                       or o.kind == "host"})

    # -- graph ----------------------------------------------------------------
    def _build(self) -> None:
        """Build and instantiate the graph on the current addresses (again after a watched
        input changes way: then the old executable is released once the GPU is idle)."""
        from cuda.core.graph import GraphDefinition
        core = _core()
        # the old definition holds the host callbacks the old executable may still call
        old_gdef = getattr(self, "gdef", None)  # noqa: F841 - kept alive until the sync below
        self.gdef = GraphDefinition()
        self._configs: dict[int, tuple[Any, Any]] = {}  # node -> (LaunchConfig, Kernel)
        self._args: dict[int, list] = {}                # node -> resolved parameters
        self._copies: dict[int, list] = {}              # node -> [dst, src, size]
        self._events: list[Any] = []
        self._gnodes: dict[int, Any] = {}
        for node in self.plan.nodes:
            try:
                self._gnodes[node.index] = self._add(node, core)
            except TracegraphError:
                raise
            except Exception as exc:  # noqa: BLE001 - a driver or cuda.core failure
                raise CudaError(f"building graph node failed: {exc}", error_name=_error_name(exc),
                                call=f"add {node.kind} node", node=handles.node_label(node),
                                where=node.location) from exc
        try:
            self._add_input_copies()
            self._bracket()
        except Exception as exc:  # noqa: BLE001
            raise CudaError(f"adding the in-graph copies of moved inputs failed: {exc}",
                            error_name=_error_name(exc), call="add memcpy node") from exc
        old = self.graph
        try:
            self.graph = self.gdef.instantiate()
        except Exception as exc:  # noqa: BLE001
            raise CudaError(f"instantiating the graph of {self.plan.name} failed: {exc}",
                            error_name=_error_name(exc), call="cuGraphInstantiate") from exc
        self._exec_handle = self.graph.handle
        self._kernel_patches: dict[int, handles.KernelPatch | None] = {}
        self._exec_views: dict[int, Any] = {}
        if old is not None:
            self.device.sync()  # the old executable may still be running
            old.close()

    def _add(self, node: PlanNode, core: Any) -> Any:
        deps = [self._gnodes[d] for d in node.deps]
        parent = deps[0] if deps else self.gdef
        op = node.op
        if node.kind == "kernel":
            key = (id(op.data.kernel), node.argtypes)
            compiled = self._compiled.get(key)
            if compiled is None:
                try:
                    compiled = _numba.compiled_kernel(op.data.kernel, node.argtypes)
                except Exception as exc:  # noqa: BLE001 - Numba's typing/lowering errors
                    raise LoweringError(f"Numba could not compile kernel {op.name} for "
                                        f"{', '.join(map(str, node.argtypes))}: {exc}",
                                        where=op.location,
                                        fix="fix the kernel; the same launch run eagerly "
                                            "raises the same error") from exc
                self._compiled[key] = compiled
            kernel, cooperative = compiled
            if cooperative:
                raise LoweringError(f"kernel {op.name} uses grid-wide synchronization "
                                    "(a cooperative launch), which cuda.core cannot put in a "
                                    "graph node", where=op.location,
                                    fix="split the kernel at the grid sync into two launches")
            dims = (op.data.griddim, op.data.blockdim, op.data.sharedmem)
            config = self._launch_configs.get(dims)
            if config is None:
                config = self._launch_configs[dims] = core.LaunchConfig(
                    grid=op.data.griddim, block=op.data.blockdim, shmem_size=op.data.sharedmem)
            args = [self._resolve(p) for p in node.params]
            self._configs[node.index] = (config, kernel)
            self._args[node.index] = args
            g = parent.launch(config, kernel, *args)
        elif node.kind == "memcpy":
            dst, src = op.data.dst, op.data.src
            copy = [self._target(dst.buffer) + dst.offset,
                    self._target(src.buffer) + src.offset, node.nbytes]
            self._copies[node.index] = copy
            if node.nbytes:
                g = parent.memcpy(*copy)
            else:  # an empty array: a placeholder node keeps the plan's edges
                g = parent.join() if deps else self.gdef.empty()
        elif node.kind == "memset":
            dst = op.data.dst
            g = parent.memset(self._target(dst.buffer) + dst.offset, int(op.data.value) & 0xFF,
                              node.nbytes)
        elif node.kind == "host":
            g = parent.callback(self._guarded(op.data.fn, node))
        elif node.kind in ("event_record", "event_wait"):
            placeholder = self.device.create_event()
            self._events.append((placeholder, op.data.event))
            g = parent.record(placeholder) if node.kind == "event_record" else \
                parent.wait(placeholder)
            handles.set_event(g, node, op.data.event)
        else:
            raise LoweringError(f"unknown node kind {node.kind}", where=node.location)
        for d in deps[1:]:
            g.pred.add(d)
        return g

    def _target(self, buffer: int) -> int:
        """Where the graph's nodes find `buffer`: its static copy while copied."""
        w = self._watch.get(buffer)
        if w is not None and w.mode == "copy":
            return self._static_address(w)
        return self._base[buffer]

    @staticmethod
    def _static_address(w: WatchedInput) -> int:
        if w.static is None:  # allocated on its first copy, kept for the next ones
            w.static = cuda.device_array(w.nbytes, np.uint8)
            w.address = _numba.device_address(w.static)
        return w.address

    def _add_input_copies(self) -> None:
        """For each copied input: a root copy-in every user depends on, and a copy-out
        after every user if the graph writes the input."""
        for w in self._watch.values():
            w.copy_in = w.copy_out = None
            if w.mode != "copy":
                continue
            caller, static = self._base[w.buffer], self._static_address(w)
            w.copy_in = self.gdef.memcpy(static, caller, w.nbytes)
            for u in w.users:
                self._gnodes[u].pred.add(w.copy_in)
            if w.written:
                w.copy_out = self._gnodes[w.users[0]].memcpy(caller, static, w.nbytes)
                for u in w.users[1:]:
                    w.copy_out.pred.add(self._gnodes[u])

    def _bracket(self) -> None:
        """The BRACKET copies, when the graph has parallel branches."""
        if not BRACKET or not self.plan.nodes:
            return
        roots = {n.index for n in self.plan.nodes if not n.deps}
        sinks = set(self._gnodes) - {d for n in self.plan.nodes for d in n.deps}
        first, last = [], []
        for w in self._watch.values():
            if w.copy_in is not None:
                roots -= set(w.users)
                first.append(w.copy_in)
            if w.copy_out is not None:
                sinks -= set(w.users)
                last.append(w.copy_out)
        first += [self._gnodes[i] for i in sorted(roots)]
        last += [self._gnodes[i] for i in sorted(sinks)]
        if len(first) < 2 and len(last) < 2 and all(len(n.deps) < 2 for n in self.plan.nodes):
            return  # a chain
        scratch = _numba.device_address(self._scratch)
        entry = self.gdef.memcpy(scratch, scratch + 32, 4)
        for node in first:
            node.pred.add(entry)
        exit_ = last[0].memcpy(scratch + 16, scratch + 48, 4)
        for node in last[1:]:
            exit_.pred.add(node)

    def _guarded(self, fn: Any, node: PlanNode) -> Any:
        errors = self._callback_errors

        def call() -> None:
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - reported after the graph runs
                errors.append((node, exc))
        return call

    def _resolve(self, p: Any) -> Any:
        if isinstance(p, Ptr):
            return self._target(p.buffer) + p.offset
        if isinstance(p, CScalar):
            return p.as_ctype()
        return p

    def _slot_table(self) -> dict[int, dict[int, list[tuple[Any, int]]]]:
        """buffer -> node -> [(param position or "dst"/"src", offset)] for movable buffers."""
        movable = (set(self.plan.patchable_buffers) | set(self._result_buffers()) |
                   {i.staging for i in self.plan.inputs if i.staging is not None})
        table: dict[int, dict[int, list]] = {}
        for b in movable:
            per_node: dict[int, list] = {}
            for node, pos, offset in self.plan.pointer_slots.get(b, ()):
                per_node.setdefault(node, []).append((pos, offset))
            table[b] = per_node
        return table

    # -- replay ---------------------------------------------------------------
    def run(self, leaves: list[Any], infos: list[ArrayInfo | None], stream: Any = None) -> Any:
        if getattr(_thread, "device", None) is not self.device:  # a thread's first replay
            self.device.set_current()
            _thread.device = self.device
        with self._lock:
            if self._callback_errors:
                self._raise_callback_errors()
            base = self._base
            for leaf, buffer, offset in self._device_inputs:
                address = infos[leaf].ptr - offset
                if base[buffer] != address:
                    self._repoint(buffer, address)
            if self._watched_inputs:
                self._follow_watched(infos)
            for buffer in self._ring:
                self._rotate_if_held(buffer)
            copied_in = []
            for entry in self._host_inputs:
                leaf, staging, offset, nbytes, direct, _ = entry
                address = infos[leaf].ptr - offset
                if direct and handles.pinned(address, nbytes):  # the graph's copies use it
                    if base[staging] != address:
                        self._repoint(staging, address)
                    continue
                own = self._own_staging[staging]
                if base[staging] != own:
                    self._repoint(staging, own)
                ctypes.memmove(own, address, nbytes)
                copied_in.append(entry)
            for owner, buffer in self._constants:
                owner[:buffer.nbytes] = host_constant_bytes(buffer)
            s = self._default_stream if stream is None else handles.core_stream(stream)
            try:
                self.graph.launch(s)
            except Exception as exc:  # noqa: BLE001
                raise self._fault(exc, "cuGraphLaunch") from exc
            if self._needs_sync:
                try:
                    s.sync()
                except Exception as exc:  # noqa: BLE001
                    raise self._fault(exc, "cuStreamSynchronize") from exc
                self._raise_callback_errors()
                for _, staging, _, _, _, back in copied_in:
                    for leaf, view in back:  # the leaf's own elements only
                        leaves[leaf][...] = np.ndarray(view.shape, view.dtype,
                                                       buffer=self._owners[staging],
                                                       offset=view.offset,
                                                       strides=view.strides)
            if self._single_output is not None:
                return self._output(self._single_output, leaves)
            return pytree.unflatten(self.plan.output_tree,
                                    [self._output(o, leaves) for o in self.plan.outputs])

    def _repoint(self, buffer: int, base: int) -> None:
        self._base[buffer] = base
        self._point_users(buffer, base)

    def _point_users(self, buffer: int, base: int) -> None:
        for node, slots in self._slots.get(buffer, {}).items():
            self._patch_node(node, buffer, base, slots)

    def _follow_watched(self, infos: list) -> None:
        """Moved watched inputs: their policies may switch way (one rebuild for all);
        otherwise re-point their users, or only their copy nodes while copied."""
        base = self._base
        moved = []
        switch = False
        for leaf, buffer, offset, w in self._watched_inputs:
            address = infos[leaf].ptr - offset
            changed = base[buffer] != address
            if w.policy is not None and (changed or not w.policy.idle) and \
                    w.policy.observe(changed):
                switch = True
                log.info("%s: input %s now follows moves by %s (move rate %.2f); rebuilding "
                         "the graph", self.plan.name, self.plan.buffers[buffer].name,
                         w.mode, w.policy.rate)
            if changed:
                base[buffer] = address
                moved.append(w)
        if switch:
            self._build()
            return
        for w in moved:
            if w.mode == "copy":
                self._point_copies(w)
            else:
                self._point_users(w.buffer, base[w.buffer])

    def _point_copies(self, w: WatchedInput) -> None:
        caller = self._base[w.buffer]
        try:
            self.graph[w.copy_in].update(dst=w.address, src=caller, size=w.nbytes)
            if w.copy_out is not None:
                self.graph[w.copy_out].update(dst=caller, src=w.address, size=w.nbytes)
        except Exception as exc:  # noqa: BLE001
            name = self.plan.buffers[w.buffer].name
            raise CudaError(f"re-pointing the in-graph copy of input {name} failed: {exc}",
                            error_name=_error_name(exc),
                            call="cuGraphExecMemcpyNodeSetParams") from exc

    def _patch_node(self, index: int, buffer: int, base: int, slots: list) -> None:
        view = self._exec_views.get(index)
        if view is None:
            view = self._exec_views[index] = self.graph[self._gnodes[index]]
        node = self.plan.nodes[index]
        try:
            if node.kind == "kernel":
                args = self._args[index]
                for pos, offset in slots:
                    args[pos] = base + offset
                patch = self._kernel_patch(index)
                if patch is not None:
                    patch.apply(slots, base)
                else:
                    config, kernel = self._configs[index]
                    view.update(config=config, kernel=kernel, args=args)
            elif node.kind == "memcpy":
                copy = self._copies[index]
                dst, src = node.op.data.dst, node.op.data.src
                if dst.buffer == buffer:
                    copy[0] = base + dst.offset
                if src.buffer == buffer:
                    copy[1] = base + src.offset
                if copy[2]:
                    view.update(dst=copy[0], src=copy[1], size=copy[2])
            elif node.kind == "memset":
                dst = node.op.data.dst
                view.update(dst=base + dst.offset, value=int(node.op.data.value) & 0xFF,
                            width=node.nbytes)
        except Exception as exc:  # noqa: BLE001
            raise CudaError(f"re-pointing a graph node failed: {exc}", error_name=_error_name(exc),
                            call="cuGraphExec*NodeSetParams", node=handles.node_label(node),
                            where=node.location) from exc

    def _kernel_patch(self, index: int) -> "handles.KernelPatch | None":
        if index not in self._kernel_patches:
            try:
                self._kernel_patches[index] = handles.KernelPatch(self._exec_handle,
                                                           self._gnodes[index].handle,
                                                           self._args[index])
            except Exception as exc:  # noqa: BLE001 - fall back to cuda.core's node update
                log.debug("direct kernel-node patching unavailable (%s); using cuda.core", exc)
                self._kernel_patches[index] = None
        return self._kernel_patches[index]

    def _rotate_if_held(self, buffer: int) -> None:
        """A result the caller still holds must not be overwritten: move to a free allocation."""
        ring = self._ring[buffer]
        current = next(i for i in range(len(ring)) if ring[i] is self._owners[buffer])
        if not self._held(buffer, ring, current):
            return  # the usual replay: nothing to do
        free = [i for i in range(len(ring)) if not self._held(buffer, ring, i)]
        if free:
            owner = ring[free[0]]
        else:
            nbytes = max(self.plan.buffers[buffer].nbytes, 1)
            if self.plan.buffers[buffer].kind == STAGING:
                owner = cuda.pinned_array(nbytes, np.uint8)
            else:
                owner = cuda.device_array(nbytes, np.uint8)
                self._free_refs[id(owner)] = _numba.allocation_refs(owner)
            ring.append(owner)
        self._owners[buffer] = owner
        self._repoint(buffer, owner.ctypes.data if isinstance(owner, np.ndarray)
                      else _numba.device_address(owner))

    def _held(self, buffer: int, ring: list, i: int) -> bool:
        """Does anyone but us still reference allocation ring[i] (a result or a view of it)?"""
        if isinstance(ring[i], np.ndarray):
            # ours: the ring's slot, getrefcount's argument, and _owners when current
            ours = 2 + (ring[i] is self._owners[buffer])
            return sys.getrefcount(ring[i]) > ours
        return _numba.allocation_refs(ring[i]) > self._free_refs[id(ring[i])]

    def _output(self, out: Any, leaves: list[Any]) -> Any:
        if out.kind == "static":
            return out.value
        if out.kind == "input":
            return leaves[out.input_index]
        v = out.view
        if out.kind == "host":  # a view of pinned staging: the ring keeps it unchanged
            return np.ndarray(v.shape, v.dtype, buffer=self._owners[v.buffer], offset=v.offset,
                              strides=v.strides)
        return _numba.device_view(self._owners[v.buffer], v.offset, v.shape, v.strides, v.dtype)

    # -- errors and inspection -----------------------------------------------
    def _fault(self, exc: BaseException, call: str) -> CudaError:
        kernels = [f"{n.op.describe()} at {n.location}" for n in self.plan.nodes
                   if n.kind == "kernel"]
        shown = "; ".join(kernels[:6]) + (f"; ... ({len(kernels)} kernels)" if len(kernels) > 6
                                          else "")
        return CudaError(f"the graph of {self.plan.name} failed on the GPU: {exc}",
                         error_name=_error_name(exc), call=call,
                         node=f"one of its kernel nodes ({shown})",
                         fix="an illegal address usually means a kernel indexed out of bounds; "
                             "run the function with backend='sim' to find which launch, and "
                             "restart the process (the CUDA context is lost)")

    def _raise_callback_errors(self) -> None:
        if not self._callback_errors:
            return
        node, exc = self._callback_errors.pop(0)
        self._callback_errors.clear()
        cuda_call = "cuda" in type(exc).__name__.lower() or "CUDA_ERROR" in str(exc)
        raise TracegraphError(
            f"host callback {node.op.name} raised {type(exc).__name__}: {exc}",
            where=node.location,
            fix=("host callbacks must not call CUDA (no launches, copies or synchronization); "
                 "move that work into the traced function" if cuda_call else
                 "fix the callback; it runs on a driver thread while the graph is in flight"))

    def driver_dot(self) -> str:
        """The driver's own DOT dump of this graph (cuGraphDebugDotPrint)."""
        from cuda.core.graph import GraphDebugPrintOptions
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "graph.dot")
            self.gdef.debug_dot_print(path, GraphDebugPrintOptions(verbose=True))
            with open(path) as f:
                return f.read()

    def close(self) -> None:
        graph = getattr(self, "graph", None)
        if graph is not None and not graph.is_closed:
            graph.close()


def build(plan: Plan, infos: list | None = None) -> CudaExecutable:
    return CudaExecutable(plan, infos)
