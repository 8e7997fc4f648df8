"""One replay of an instantiated graph, in named steps: follow the caller's device arrays
(re-point the nodes that use a moved one, or only its in-graph copy), move results the
caller still holds out of the way, stage NumPy inputs and held host data, launch, and for
NumPy results synchronize, copy written inputs back element by element and hand out views
of pinned memory. Everything that does not depend on the call is precomputed."""
from __future__ import annotations

import ctypes
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import pytree
from ...errors import CudaError, LoweringError
from ...ir import OpKind, OutputKind
from ...plan import HostInput, Plan, ReplayTable
from ...signature.call import static_key
from .. import argument_view
from ..sim import host_constant_bytes
from .build import BuiltGraph, label
from .memory import GraphMemory
from .moved_inputs import WatchedInput
from .platform import error_name

log = logging.getLogger("tracegraph.backends.cuda")

_NOWHERE = -1  # a buffer address no array has: its nodes are re-pointed on the next call
_NOWHERE_VALUE = object()  # a dynamic scalar's value no call has: patched on the next call


class Replayer:
    def __init__(self, plan: Plan, table: ReplayTable, memory: GraphMemory, platform: Any,
                 watch: dict[int, WatchedInput], recapture: Any = None):
        self.plan, self.table, self.memory, self.platform = plan, table, memory, platform
        self.watch = watch
        # buffer -> the (top-level) library nodes using it, captured again when it moves
        self.recapture = recapture
        self.library_users: dict[int, list[int]] = {}
        for n in plan.nodes:
            if n.kind == OpKind.LIBRARY:
                for b in sorted({a.buffer for a in n.op.accesses}):
                    self.library_users.setdefault(b, []).append(n.index)
        self.device_inputs = [(d.leaf, d.buffer, d.offset) for d in table.device_inputs
                              if d.buffer not in watch]
        self.watched = [(d.leaf, d.buffer, d.offset, watch[d.buffer])
                        for d in table.device_inputs if d.buffer in watch]
        self.constants = [(memory.allocation(b), plan.buffers[b]) for b in table.constants]
        # buffer -> node -> [(parameter position or "dst"/"src", offset)]
        self.slots: dict[int, dict[int, list]] = {}
        for buffer, places in plan.pointer_slots.items():
            for node, pos, offset in places:
                self.slots.setdefault(buffer, {}).setdefault(node, []).append((pos, offset))
        self.built: BuiltGraph = None  # type: ignore[assignment]  # attach() sets it
        self._returns_none = not plan.outputs and pytree.unflatten(plan.output_tree, []) is None
        self.scalar_values: dict[int, Any] = {}  # dynamic scalar leaf -> value the graph holds
        self._input_buffers = {buffer for _, buffer, _ in self.device_inputs}
        self._followed: list | None = None  # the infos the device inputs point at

    def attach(self, built: BuiltGraph) -> None:
        """Replay this (new) graph: forget what was cached about the old one."""
        self.built = built
        self._followed = None
        self._views: dict[int, Any] = {}
        self._patches: dict[int, Any] = {}
        # a new graph holds the values the function was traced with
        self.scalar_values = {leaf: self.plan.inputs[leaf].value
                              for leaf in self.plan.scalar_slots}

    # -- the steps ------------------------------------------------------------------
    def follow_device_inputs(self, infos: list) -> None:
        if infos is self._followed:
            return  # the very list followed last (the signature memo's): nothing moved
        self._followed = None
        base = self.memory.base
        moved = [(buffer, infos[leaf].ptr - offset) for leaf, buffer, offset in self.device_inputs
                 if base[buffer] != infos[leaf].ptr - offset]
        if len(moved) == 1:
            self.repoint(*moved[0])
        elif moved:
            self._repoint_together(moved)
        self._followed = infos

    def _repoint_together(self, moved: list[tuple[int, int]]) -> None:
        """Several inputs moved: a library call using two of them is captured again once,
        over all the new addresses (a capture over one new and one old address could touch
        an array the caller has freed since)."""
        base = self.memory.base
        users: set[int] = set()
        try:
            for buffer, address in moved:
                base[buffer] = address
            for buffer, address in moved:
                self.repoint(buffer, address, recapture=False)
                users.update(self.library_users.get(buffer, ()))
            for index in sorted(users):
                self._recapture(self.plan.nodes[index])
        except BaseException:
            for buffer, _ in moved:  # not (all) pointed: the next call tries again
                base[buffer] = _NOWHERE
            raise

    def watch_idle(self) -> bool:
        """No watched input's policy would note a call that moves nothing (a direct replay
        of the very same objects skips them)."""
        return all(w.policy is None or w.policy.idle for *_, w in self.watched)

    def follow_watched(self, infos: list) -> bool:
        """Moved watched inputs: True when a policy switched way (the graph must be rebuilt
        on the new addresses); otherwise their users, or only their copies, re-pointed."""
        base = self.memory.base
        moved, switch = [], False
        for leaf, buffer, offset, w in self.watched:
            address = infos[leaf].ptr - offset
            changed = base[buffer] != address
            if w.policy is not None and (changed or not w.policy.idle) and \
                    w.policy.observe(changed):
                switch = True
                log.info("%s: input %s now follows moves by %s (move rate %.2f); rebuilding "
                         "the graph", self.plan.name, self.plan.buffers[buffer].name, w.mode,
                         w.policy.rate)
            if changed:
                base[buffer] = address
                moved.append(w)
        if switch:
            return True
        for w in moved:
            if w.mode == "copy":
                try:
                    self._point_copies(w)
                except BaseException:
                    base[w.buffer] = _NOWHERE  # not pointed: the next call tries again
                    raise
            else:
                self.repoint(w.buffer, base[w.buffer])
        return False

    def follow_scalars(self, leaves: list) -> None:
        """Dynamic scalars with a new value: patch the parameters that hold them."""
        for leaf, held in self.scalar_values.items():
            value = leaves[leaf]
            # as the signature keys values: -0.0 is not 0.0 (copysign tells them apart)
            if value is held or static_key(value) == static_key(held):
                continue
            self.scalar_values[leaf] = _NOWHERE_VALUE  # until every node holds the value
            per_node: dict[int, list] = {}
            for node, pos in self.plan.scalar_slots[leaf]:
                slot = self.plan.nodes[node].params[pos]
                self.built.args[node][pos] = slot.as_ctype(value)
                per_node.setdefault(node, []).append((pos, value))
            for node, values in per_node.items():
                self._kernel_patch(node).apply_values(values)
            self.scalar_values[leaf] = value

    def _kernel_patch(self, index: int) -> Any:
        patch = self._patches.get(index)
        if patch is None:
            built = self.built
            patch = self._patches[index] = self.platform.kernel_patch(
                built.graph, built.nodes[index], built.args[index])
        return patch

    def free_results(self) -> None:
        for buffer in self.table.results:
            address = self.memory.free_result(buffer)
            if address is not None:
                self.repoint(buffer, address)

    def stage_host_inputs(self, infos: list) -> list[HostInput]:
        """Copy pageable NumPy inputs into pinned staging; let the graph's copies use
        page-locked ones directly. Returns the staged ones (to write back)."""
        base, staged = self.memory.base, []
        for h in self.table.host_inputs:
            address = infos[h.leaf].ptr - h.offset
            if h.direct and self.platform.is_pinned(address, h.nbytes):
                if base[h.staging] != address:
                    self.repoint(h.staging, address)
                continue
            own = self.memory.own_staging[h.staging]
            if base[h.staging] != own:
                self.repoint(h.staging, own)
            ctypes.memmove(own, address, h.nbytes)
            staged.append(h)
        for owner, buffer in self.constants:
            owner[:buffer.nbytes] = host_constant_bytes(buffer)
        return staged

    def write_back(self, staged: list[HostInput], leaves: list) -> None:
        """Each written NumPy leaf's own elements, from staging into the caller's array."""
        for h in staged:
            owner = self.memory.allocation(h.staging)
            for leaf, view in h.write_back:
                leaves[leaf][...] = np.ndarray(view.shape, view.dtype, buffer=owner,
                                               offset=view.offset, strides=view.strides)

    def results(self, leaves: Sequence[Any]) -> Any:
        single = self.table.single_output
        if single is not None:
            return self._output(single, leaves)
        if self._returns_none:
            return None
        out: list[Any] = []
        for o, same in zip(self.plan.outputs, self.table.same_as):
            out.append(out[same] if same is not None else self._output(o, leaves))
        return pytree.unflatten(self.plan.output_tree, out)

    def _output(self, out: Any, leaves: Sequence[Any]) -> Any:
        if out.kind == OutputKind.STATIC:
            return out.value
        if out.kind == OutputKind.INPUT:
            return leaves[out.input_index]
        if out.kind == OutputKind.INPUT_VIEW:
            return argument_view(leaves[out.input_index], out)
        return self.memory.result(out.view, host=out.kind == OutputKind.HOST)

    # -- re-pointing ------------------------------------------------------------------
    def repoint(self, buffer: int, base: int, recapture: bool = True) -> None:
        if buffer in self._input_buffers:
            self._followed = None
        self.memory.base[buffer] = base
        try:
            for node, slots in self.slots.get(buffer, {}).items():
                self._patch(node, buffer, base, slots)
            for index in self.library_users.get(buffer, ()) if recapture else ():
                self._recapture(self.plan.nodes[index])
        except BaseException:
            # some node still uses the old address: the next call must not take the graph
            # for pointed at this one
            self.memory.base[buffer] = _NOWHERE
            raise

    def _recapture(self, user: Any) -> None:
        try:
            self.recapture(self.built, user)
        except (CudaError, LoweringError):
            raise
        except Exception as exc:
            raise CudaError(f"capturing a library call again over a moved array failed: "
                            f"{exc}", error_name=error_name(exc),
                            call="cuGraphExecChildGraphNodeSetParams", node=label(user),
                            where=user.location) from exc

    def _patch(self, index: int, buffer: int, base: int, slots: list) -> None:
        built = self.built
        node = self.plan.nodes[index]
        try:
            if node.kind == OpKind.KERNEL:
                args = built.args[index]
                for pos, offset in slots:
                    args[pos] = base + offset
                self._kernel_patch(index).apply(slots, base)
            elif node.kind == OpKind.MEMCPY:
                copy = built.copies[index]
                dst, src = node.op.copy.dst, node.op.copy.src
                if dst.buffer == buffer:
                    copy[0] = base + dst.offset
                if src.buffer == buffer:
                    copy[1] = base + src.offset
                if copy[2]:  # a 0-byte copy is an empty node, which takes no update
                    self._view(index).update(dst=copy[0], src=copy[1], size=copy[2])
            elif node.kind == OpKind.MEMSET:
                fill = node.op.fill
                self._view(index).update(dst=base + fill.dst.offset,
                                         value=int(fill.value) & 0xFF, width=node.nbytes)
        except Exception as exc:
            raise CudaError(f"re-pointing a graph node failed: {exc}", error_name=error_name(exc),
                            call="cuGraphExec*NodeSetParams", node=label(node),
                            where=node.location) from exc

    def _view(self, index: int) -> Any:
        view = self._views.get(index)
        if view is None:
            view = self._views[index] = self.built.graph[self.built.nodes[index]]
        return view

    def _point_copies(self, w: WatchedInput) -> None:
        caller = self.memory.base[w.buffer]
        graph = self.built.graph
        try:
            graph[w.copy_in].update(dst=w.address, src=caller, size=w.nbytes)
            if w.copy_out is not None:
                graph[w.copy_out].update(dst=caller, src=w.address, size=w.nbytes)
        except Exception as exc:
            name = self.plan.buffers[w.buffer].name
            raise CudaError(f"re-pointing the in-graph copy of input {name} failed: {exc}",
                            error_name=error_name(exc),
                            call="cuGraphExecMemcpyNodeSetParams") from exc
