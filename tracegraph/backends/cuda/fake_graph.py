"""The CPU stand-in's graphs: definitions that record nodes, parameters and edges as
cuda.core's do, executables that snapshot them (an update follows cuda.core's rules), the
one in-order stream, and conditional nodes' conditions. fake.py's FakePlatform runs the
nodes."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .fake import FakePlatform


class FakeNode:
    """A node of a fake graph definition. Nodes are made at a graph's root (cuda.core's
    methods on FakeGraphDefinition, or the platform's add_*) and joined by add_edges."""

    def __init__(self, graph: FakeGraphDefinition, kind: str, params: dict):
        self.graph, self.kind, self.params = graph, kind, params
        self.pred: set[FakeNode] = set()
        # a conditional node's body graphs, under cuda.core's names
        self.body: Any = None
        self.then: Any = None
        self.else_: Any = None
        self.branches: tuple = ()
        self.handle = len(graph.all)
        graph.all.append(self)


class FakeGraphDefinition:
    """A graph (the top one or a conditional node's body) with the root-level node
    builders of cuda.core's GraphDefinition that the backend uses. Kernel, host and event
    nodes come from the platform's add_* (fake.py), as on the GPU."""

    def __init__(self, platform: FakePlatform):
        self.platform = platform
        self.all: list[FakeNode] = []

    def node(self, kind: str, params: dict) -> FakeNode:
        return FakeNode(self, kind, params)

    def memcpy(self, dst: int, src: int, size: int) -> FakeNode:
        return self.node("memcpy", {"dst": dst, "src": src, "size": size})

    def memset(self, dst: int, value: int, width: int) -> FakeNode:
        return self.node("memset", {"dst": dst, "value": value, "width": width})

    def empty(self) -> FakeNode:
        return self.node("empty", {})

    def embed(self, child: Any) -> FakeNode:
        return self.node("graph", {"child": child})

    # conditional nodes, as cuda.core's: the bodies are graphs of their own
    def create_condition(self, default_value: int | None = None) -> FakeCondition:
        return FakeCondition(default_value)

    def while_loop(self, cond: FakeCondition) -> FakeNode:
        node = self.node("while", {"cond": cond, "bodies": [self._body()]})
        node.body = node.params["bodies"][0]
        return node

    def if_then(self, cond: FakeCondition) -> FakeNode:
        node = self.node("if", {"cond": cond, "bodies": [self._body()]})
        node.then = node.params["bodies"][0]
        return node

    def if_else(self, cond: FakeCondition) -> FakeNode:
        node = self.node("if", {"cond": cond, "bodies": [self._body(), self._body()]})
        node.then, node.else_ = node.params["bodies"]
        return node

    def switch(self, cond: FakeCondition, n: int) -> FakeNode:
        node = self.node("switch", {"cond": cond, "bodies": [self._body() for _ in range(n)]})
        node.branches = tuple(node.params["bodies"])
        return node

    def _body(self) -> FakeGraphDefinition:
        return FakeGraphDefinition(self.platform)

    def add_edges(self, edges: list[tuple[FakeNode, FakeNode]]) -> None:
        """cuGraphAddDependencies: both ends in this graph, no edge twice, no loop."""
        for a, b in edges:
            if a.graph is not self or b.graph is not self:
                raise RuntimeError("cuGraphAddDependencies: CUDA_ERROR_INVALID_VALUE (a node "
                                   "of another graph)")
            if a is b or a in b.pred:
                raise RuntimeError("cuGraphAddDependencies: CUDA_ERROR_INVALID_VALUE (a "
                                   "self edge or an edge given twice)")
            b.pred.add(a)

    def nodes(self) -> list[FakeNode]:
        return list(self.all)

    def instantiate(self, options: Any = None) -> FakeGraph:
        self.platform.counts["instantiate"] += 1
        self.options = options
        return FakeGraph(self.platform, self)

    def debug_dot_print(self, path: str, options: Any = None) -> None:  # noqa: ARG002
        with open(path, "w") as f:
            f.write("digraph fake {\n")
            for n in self.all:
                f.write(f'  n{n.handle} [label="{n.kind}"];\n')
                f.writelines(f"  n{p.handle} -> n{n.handle};\n" for p in n.pred)
            f.write("}\n")


class FakeGraph:
    """An executable: a snapshot of a definition's nodes, parameters and edges."""

    def __init__(self, platform: FakePlatform, gdef: FakeGraphDefinition):
        self.platform = platform
        self.handle = id(self)
        self.is_closed = False
        self._take(gdef)

    def _take(self, gdef: FakeGraphDefinition) -> None:
        self.kinds = [n.kind for n in gdef.all]
        self.params = [_snapshot(n.params) for n in gdef.all]
        self.preds = [sorted(p.handle for p in n.pred) for n in gdef.all]

    def __getitem__(self, node: FakeNode) -> FakeExecView:
        if self.kinds[node.handle] == "empty":
            raise TypeError("EmptyNode does not support executable updates")
        return FakeExecView(self, node.handle)

    def update(self, gdef: FakeGraphDefinition) -> None:
        """Whole-graph update: the same topology and node kinds, new parameters."""
        kinds = [n.kind for n in gdef.all]
        preds = [sorted(p.handle for p in n.pred) for n in gdef.all]
        if kinds != self.kinds or preds != self.preds:
            raise RuntimeError("Graph update failed: CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED")
        self.platform.counts["graph_update"] += 1
        self._take(gdef)

    def upload(self, stream: Any) -> None:  # noqa: ARG002 - the Platform interface
        self.platform.counts["upload"] += 1

    def launch(self, stream: Any) -> None:  # noqa: ARG002 - the Platform interface
        if self.is_closed:
            raise RuntimeError("launch of a closed graph")
        # every launch goes to its device's one stream, which runs graphs one after
        # another: two threads' launches on one device never interleave their nodes
        with self.platform.stream_order:
            self.platform.counts["launch"] += 1
            for i in self.platform.order(self.preds):
                self.platform.run_node(self.kinds[i], self.params[i])

    def close(self) -> None:
        self.is_closed = True


class FakeExecView:
    """graph[node]: an executable node's parameters, updated in place."""

    def __init__(self, graph: FakeGraph, index: int):
        self.graph, self.index = graph, index

    def update(self, **params: Any) -> None:
        kind = self.graph.kinds[self.index]
        self.graph.platform.counts[f"update_{kind}"] += 1
        if kind == "kernel":
            params = {"config": params["config"], "kernel": params["kernel"],
                      "args": list(params["args"])}
        elif kind == "memset":
            params = {"dst": params["dst"], "value": params["value"], "width": params["width"]}
        self.graph.params[self.index].update(params)


class FakeKernelPatch:
    """cuGraphExecKernelNodeSetParams on our own parameter storage: one driver call."""

    def __init__(self, graph: FakeGraph, node: FakeNode, args: list):  # noqa: ARG002
        self.graph, self.index = graph, node.handle

    def apply(self, slots: list, base: int) -> None:
        self.graph.platform.counts["kernel_patch"] += 1
        args = self.graph.params[self.index]["args"]
        for pos, offset in slots:
            args[pos] = base + offset

    def apply_values(self, values: list) -> None:
        self.graph.platform.counts["kernel_patch"] += 1
        args = self.graph.params[self.index]["args"]
        for pos, value in values:
            args[pos] = type(args[pos])(value)


class FakeStream:
    def sync(self) -> None:
        pass

    def record(self) -> Any:
        return object()

    def wait(self, event: Any) -> None:
        pass


class FakeCondition:
    """A conditional node's condition: set by the helper kernels, read by the node."""

    def __init__(self, default: int | None):
        self.default = default or 0
        self.value = self.default


def _snapshot(params: dict) -> dict:
    out = dict(params)
    if "args" in out:
        out["args"] = list(out["args"])
    if "bodies" in out:  # a body is instantiated with the graph holding it
        out["bodies"] = [FakeGraph(body.platform, body) for body in out["bodies"]]
    if isinstance(out.get("child"), FakeGraphDefinition):  # an embedded child graph, too
        out["child"] = FakeGraph(out["child"].platform, out["child"])
    return out
