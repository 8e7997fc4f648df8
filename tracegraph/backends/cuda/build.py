"""Plan -> an instantiated CUDA graph on the current addresses: one builder per node kind
(a table, as torch.fx's interpreter has one method per opcode), then the in-graph copies
of moved inputs and the bracket, then instantiation.

The bracket: a graph with parallel branches gets a 4-byte memcpy before its roots and one
after its sinks. On an H200 that ran graphs of 4 to 128 independent kernels 1.6-5.4x
faster and 8 chains of 16 kernels 1.2-1.3x faster; a memcpy at one end only was erratic,
empty nodes changed nothing; chains get none (there it cost about 2 us).
"""
from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...errors import CudaError, LoweringError, TracegraphError
from ...ir import OpKind, View
from ...plan import CScalar, Plan, PlanNode, Ptr, ScalarSlot
from ...signature import describe
from .memory import GraphMemory
from .moved_inputs import WatchedInput
from .node_checks import check_baked, check_co_resident
from .pending import PendingKernels
from .platform import error_name

BRACKET = True  # off only to measure its effect


@dataclass
class BuiltGraph:
    """A graph definition, its executable, and what re-pointing needs of each node."""
    gdef: Any
    nodes: dict[int, Any] = field(default_factory=dict)      # plan node -> graph node
    args: dict[int, list] = field(default_factory=dict)      # kernel node -> parameters
    copies: dict[int, list] = field(default_factory=dict)    # memcpy node -> [dst, src, n]
    captures: dict[int, Any] = field(default_factory=dict)   # library node -> its capture
    graph: Any = None


class GraphBuilder:
    """Builds one executable's graph; kept for rebuilding it when an input changes way."""

    def __init__(self, plan: Plan, memory: GraphMemory, watch: dict[int, WatchedInput],
                 platform: Any, guard: Callable[[Any, PlanNode], Any]):
        self.plan, self.memory, self.watch, self.platform = plan, memory, watch, platform
        self.guard = guard  # wraps a host callback so its errors are reported later
        # (kernel, argtypes) -> (compiled kernel, cooperative), and the extents of what
        # Numba compiled into it; then the same by the ids of the two (a loop's launches
        # share one argtypes tuple, lower.py: hashing Numba's types cost 1 us a node),
        # with the argtypes kept alive so their id stays theirs
        self._kernels: dict[tuple, tuple[tuple[Any, bool], list[tuple[int, int]]]] = {}
        self._kernel_ids: dict[tuple[int, int], tuple[tuple[Any, bool],
                                                      list[tuple[int, int]], tuple]] = {}
        self._builders = {OpKind.KERNEL: self._kernel, OpKind.MEMCPY: self._memcpy,
                          OpKind.MEMSET: self._memset, OpKind.HOST: self._host,
                          OpKind.EVENT_RECORD: self._event, OpKind.EVENT_WAIT: self._event,
                          OpKind.CONDITIONAL: self._conditional,
                          OpKind.LIBRARY: self._library}
        self._priorities = _uses_priority(plan.nodes)
        self._pending = PendingKernels()  # the root's plain kernel nodes, made together
        self._resolved: dict[int, list] = {}  # id(node.params) -> their values, this build

    def build(self, instantiate: bool = True) -> BuiltGraph:
        """Every node at the root of its graph, then the graph's edges in one call."""
        built = BuiltGraph(self.platform.new_graph())
        edges: list[tuple[Any, Any]] = []
        self._pending, self._resolved = PendingKernels(), {}  # (a failed build's are gone)
        for node in self.plan.nodes:
            try:
                g = self._builders[node.kind](built, node, built.gdef, edges)
            except TracegraphError:
                raise
            except Exception as exc:
                raise CudaError(f"building graph node failed: {exc}", error_name=error_name(exc),
                                call=f"add {node.kind} node", node=label(node),
                                where=node.location) from exc
            if node.kind != OpKind.CONDITIONAL:  # it joins its own helper node to them
                _after_deps(built, node, g, edges)
            built.nodes[node.index] = g
        self._resolved = {}
        try:
            built.nodes = self._pending.make(self.platform, built.gdef, built.nodes, edges)
        except Exception as exc:
            raise CudaError(f"building the graph's kernel nodes failed: {exc}",
                            error_name=error_name(exc), call="cuGraphAddKernelNode") from exc
        try:
            self._input_copies(built, edges)
            if BRACKET:
                self._bracket(built, edges)
        except Exception as exc:
            raise CudaError(f"adding the in-graph copies failed: {exc}",
                            error_name=error_name(exc), call="add memcpy node") from exc
        self._add_edges(built.gdef, edges)
        if instantiate:
            self.instantiate(built)
        return built

    def instantiate(self, built: BuiltGraph) -> None:
        try:
            # kernel-node priorities count only when asked for
            built.graph = self.platform.instantiate(built.gdef, self._priorities)
        except Exception as exc:
            raise CudaError(f"instantiating the graph of {self.plan.name} failed: {exc}",
                            error_name=error_name(exc), call="cuGraphInstantiate") from exc
        self.upload(built)

    def upload(self, built: BuiltGraph) -> None:
        """Put the executable on the device now (cuGraphUpload), so the first replay does
        not pay for it."""
        try:
            built.graph.upload(self.platform.stream(None))
        except Exception as exc:
            raise CudaError(f"uploading the graph of {self.plan.name} failed: {exc}",
                            error_name=error_name(exc), call="cuGraphUpload") from exc

    # -- addresses ----------------------------------------------------------------
    def target(self, buffer: int) -> int:
        """Where the graph's nodes find `buffer`: its static copy while it is copied."""
        w = self.watch.get(buffer)
        if w is not None and w.mode == "copy":
            return self.static_address(w)
        return self.memory.base[buffer]

    def static_address(self, w: WatchedInput) -> int:
        if w.static is None:  # allocated on its first copy, kept for the next ones
            w.static = self.platform.alloc_device(w.nbytes)
            w.address = self.platform.address(w.static)
        return w.address

    def resolve(self, p: Any) -> Any:
        if isinstance(p, Ptr):
            return self.target(p.buffer) + p.offset
        if isinstance(p, CScalar):
            return p.as_ctype()
        if isinstance(p, ScalarSlot):  # the value it was traced with; replays patch theirs
            return p.as_ctype(self.plan.inputs[p.leaf].value)
        return p

    # -- one builder per node kind --------------------------------------------------
    def _add_edges(self, graph: Any, edges: list[tuple[Any, Any]]) -> None:
        try:
            self.platform.add_edges(graph, edges)
        except Exception as exc:
            raise CudaError(f"adding the graph's {len(edges)} edges failed: {exc}",
                            error_name=error_name(exc), call="cuGraphAddDependencies") from exc

    def _kernel(self, built: BuiltGraph, node: PlanNode, root: Any, _: list) -> Any:
        launch = node.op.launch
        found = self._kernel_ids.get((id(launch.kernel), id(node.argtypes)))
        if found is None:
            compiled, extents = self._compiled(node)
            found = self._kernel_ids[(id(launch.kernel), id(node.argtypes))] = \
                (compiled, extents, node.argtypes)
        (kernel, cooperative), baked, _kept = found
        check_baked(node, baked, self.plan.buffers)
        # a kernel launched again with the same arguments shares its parameters' tuple
        # (lower.py): resolved once; each node keeps its own list, which replays patch
        shared = self._resolved.get(id(node.params))
        if shared is None:
            shared = self._resolved[id(node.params)] = [self.resolve(p) for p in node.params]
        built.args[node.index] = list(shared)
        attrs = launch.attributes
        if root is built.gdef and not (cooperative or launch.cooperative) and attrs is None:
            # made with the graph's other plain kernel nodes in one call (build)
            return self._pending.add((launch.griddim, launch.blockdim, launch.sharedmem,
                                      kernel, shared))
        g = self.platform.add_kernel(root, launch.griddim, launch.blockdim, launch.sharedmem,
                                     kernel, built.args[node.index])
        if cooperative or launch.cooperative:
            check_co_resident(node, self.platform)
            self.platform.set_cooperative(g)  # cuda.core cannot make one (cuda-python#2421)
        if attrs is not None:
            if attrs.priority is not None:
                self.platform.set_priority(g, attrs.priority)
            if attrs.persist is not None:
                lo, hi = attrs.persist.byte_range()
                self.platform.set_access_policy(g, self.target(attrs.persist.buffer) + lo,
                                                hi - lo, attrs.hit_ratio)
        return g

    def _compiled(self, node: PlanNode) -> tuple[tuple[Any, bool], list[tuple[int, int]]]:
        launch = node.op.launch
        key = (id(launch.kernel), node.argtypes)
        found = self._kernels.get(key)
        if found is None:
            try:
                compiled = self.platform.compile(launch.kernel, node.argtypes)
            except Exception as exc:
                raise LoweringError(f"Numba could not compile kernel {node.name} for "
                                    f"{', '.join(map(str, node.argtypes))}: {exc}",
                                    where=node.location,
                                    fix="fix the kernel; the same launch run eagerly raises "
                                        "the same error") from exc
            found = self._kernels[key] = (compiled, _extents(
                self.platform.baked_arrays(launch.kernel, node.argtypes)))
        return found

    def _library(self, built: BuiltGraph, node: PlanNode, root: Any, _: list) -> Any:
        """The call captured into a child graph over the buffers' addresses now; a caller's
        device array that moves later is followed by capturing it again (recapture)."""
        child = self.platform.capture_library(node, self._library_args(node))
        if child is None:  # no work (a one-rank collective): a placeholder keeps the edges
            return root.empty()
        built.captures[node.index] = child  # its objects live as long as the graph uses it
        return root.embed(child.graph_definition)

    def _library_args(self, node: PlanNode) -> list:
        call = node.op.library
        written = {a.buffer for a in node.op.accesses if a.writes}
        return [(self.target(a.buffer) + a.offset, a, a.buffer in written)
                if isinstance(a, View) else a for a in call.args]

    def recapture(self, built: BuiltGraph, node: PlanNode) -> None:
        """A library node over the buffers' addresses now (an input moved): captured again
        (no warm-up: it ran at build) and set into the executable in place."""
        if node.index not in built.captures:
            return  # it captured nothing: there is nothing to point
        child = self.platform.capture_library(node, self._library_args(node), warm=False)
        self.platform.set_child_graph(built.graph, built.nodes[node.index],
                                      child.graph_definition)
        built.captures[node.index] = child

    def _memcpy(self, built: BuiltGraph, node: PlanNode, root: Any, _: list) -> Any:
        dst, src = node.op.copy.dst, node.op.copy.src
        copy = [self.target(dst.buffer) + dst.offset, self.target(src.buffer) + src.offset,
                node.nbytes]
        built.copies[node.index] = copy
        if node.nbytes:
            return root.memcpy(*copy)
        # an empty array: a placeholder keeps the plan's edges (and is never re-pointed)
        return root.empty()

    def _memset(self, built: BuiltGraph, node: PlanNode, root: Any, _: list) -> Any:  # noqa: ARG002
        fill = node.op.fill
        return root.memset(self.target(fill.dst.buffer) + fill.dst.offset,
                           int(fill.value) & 0xFF, node.nbytes)

    def _host(self, built: BuiltGraph, node: PlanNode, root: Any, _: list) -> Any:  # noqa: ARG002
        return self.platform.add_host(root, self.guard(node.op.host_call.fn, node))

    def _event(self, built: BuiltGraph, node: PlanNode, root: Any, _: list) -> Any:  # noqa: ARG002
        return self.platform.add_event(root, node.kind == OpKind.EVENT_RECORD,
                                       node.op.event.event)

    def _conditional(self, built: BuiltGraph, node: PlanNode, root: Any, edges: list) -> Any:
        """A helper node sets the condition from the flag (in front, and for a loop again
        at the end of its body), then the conditional node holds the bodies."""
        c = node.op.conditional
        try:
            cond = built.gdef.create_condition(default_value=0)
        except Exception as exc:  # an older driver or cuda.core: say what is needed
            raise LoweringError(f"tg.{c.kind}_ needs CUDA conditional graph nodes, which "
                                f"this driver or cuda.core does not offer ({exc})",
                                where=node.location,
                                fix="use a CUDA 12.4+ driver with cuda.core >= 1.2, or run "
                                    "the loop on the host around the compiled function"
                                ) from exc
        flag = self.target(c.flag.buffer) + c.flag.offset
        kind = "i64" if c.flag.dtype.itemsize == 8 else "i32"
        one = ((1, 1, 1), (1, 1, 1), 0)
        if c.kind == "while":
            assert c.counter is not None  # a loop counts its iterations
            counter = self.target(c.counter.buffer) + c.counter.offset
            args = [cond, flag, counter, ctypes.c_int32(c.max_iterations)]
            start = self.platform.add_kernel(
                root, *one, self.platform.condition_helper(f"tg_while_start_{kind}"), args)
            _after_deps(built, node, start, edges)
            loop = root.while_loop(cond)
            edges.append((start, loop))
            body, body_edges = self._body(built, node.bodies[0], loop.body)
            helper = self.platform.condition_helper(f"tg_while_next_{kind}")
            last = self.platform.add_kernel(loop.body, *one, helper, args)
            body_edges += [(s, last) for s in body]
            self._add_edges(loop.body, body_edges)
            return loop
        name = "tg_if" if c.kind == "if" else "tg_switch"
        pre = self.platform.add_kernel(root, *one,
                                       self.platform.condition_helper(f"{name}_{kind}"),
                                       [cond, flag])
        _after_deps(built, node, pre, edges)
        if c.kind == "switch":
            g = root.switch(cond, len(node.bodies))
            targets = list(g.branches)
        elif len(node.bodies) == 2:
            g = root.if_else(cond)
            targets = [g.then, g.else_]
        else:
            g = root.if_then(cond)
            targets = [g.then]
        edges.append((pre, g))
        for nodes, target in zip(node.bodies, targets):
            self._add_edges(target, self._body(built, nodes, target)[1])
        return g

    def _body(self, built: BuiltGraph, nodes: tuple, root: Any) -> tuple[list, list]:
        """A body's nodes in `root` (a body graph): its sinks and its edges (not added
        yet). Nothing in a body is re-pointed, so what its builders record goes to a
        scratch record."""
        scratch = BuiltGraph(built.gdef)
        edges: list[tuple[Any, Any]] = []
        used: set[int] = set()
        for n in nodes:
            g = self._builders[n.kind](scratch, n, root, edges)
            if n.kind != OpKind.CONDITIONAL:
                _after_deps(scratch, n, g, edges)
            scratch.nodes[n.index] = g
            used.update(n.deps)
        return [scratch.nodes[n.index] for n in nodes if n.index not in used], edges

    # -- around the plan's nodes ------------------------------------------------------
    def _input_copies(self, built: BuiltGraph, edges: list) -> None:
        """For each copied input: a root copy-in every user depends on, and a copy-out
        after every user if the graph writes the input."""
        for w in self.watch.values():
            w.copy_in = w.copy_out = None
            if w.mode != "copy":
                continue
            caller, static = self.memory.base[w.buffer], self.static_address(w)
            w.copy_in = built.gdef.memcpy(static, caller, w.nbytes)
            edges += [(w.copy_in, built.nodes[u]) for u in w.users]
            if w.written:
                w.copy_out = built.gdef.memcpy(caller, static, w.nbytes)
                edges += [(built.nodes[u], w.copy_out) for u in w.users]

    def _bracket(self, built: BuiltGraph, edges: list) -> None:
        """A 4-byte memcpy before the roots and after the sinks, when there are branches."""
        nodes = self.plan.nodes
        if not nodes:
            return
        roots = {n.index for n in nodes if not n.deps}
        sinks = set(built.nodes) - {d for n in nodes for d in n.deps}
        first, last = [], []
        for w in self.watch.values():
            if w.copy_in is not None:
                roots -= set(w.users)
                first.append(w.copy_in)
            if w.copy_out is not None:
                sinks -= set(w.users)
                last.append(w.copy_out)
        first += [built.nodes[i] for i in sorted(roots)]
        last += [built.nodes[i] for i in sorted(sinks)]
        if len(first) < 2 and len(last) < 2 and all(len(n.deps) < 2 for n in nodes):
            return  # a chain
        scratch = self.memory.scratch_address()
        entry = built.gdef.memcpy(scratch, scratch + 32, 4)
        edges += [(entry, node) for node in first]
        exit_ = built.gdef.memcpy(scratch + 16, scratch + 48, 4)
        edges += [(node, exit_) for node in last]


def _uses_priority(nodes: Any) -> bool:
    for n in nodes:
        if n.kind == OpKind.KERNEL:
            attrs = n.op.launch.attributes
            if attrs is not None and attrs.priority is not None:
                return True
        if any(_uses_priority(body) for body in n.bodies):
            return True
    return False


def label(node: PlanNode) -> str:
    return f"{node.index} {node.op.describe()}"


def _after_deps(built: BuiltGraph, node: PlanNode, g: Any, edges: list) -> None:
    """Edges from the graph nodes of `node`'s dependencies to `g`."""
    edges += [(built.nodes[d], g) for d in node.deps]


def _extents(arrays: list[Any]) -> list[tuple[int, int]]:
    """The byte extents of device arrays (of those describe() reads)."""
    out = []
    for a in arrays:
        info = describe(a)
        if info is not None:
            out.append(info.extent)
    return out
