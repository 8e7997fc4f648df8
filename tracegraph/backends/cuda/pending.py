"""Kernel nodes at a graph's root made together: the builder hands out a placeholder for
each, and one platform call (add_kernels: one C loop where the helper is built) makes them
all before the graph's edges go in, since every node sits at the root and the edges are
added last (build.py)."""
from __future__ import annotations

from typing import Any


class Pending:
    """A kernel node not made yet (PendingKernels.make makes it)."""

    __slots__ = ("node",)

    def __init__(self) -> None:
        self.node: Any = None


class PendingKernels:
    """The launches (grid, block, sharedmem, kernel, args) of one graph's plain kernel
    nodes, in the order the builder met them."""

    def __init__(self) -> None:
        self._launches: list[tuple[Pending, tuple]] = []

    def add(self, launch: tuple) -> Pending:
        placeholder = Pending()
        self._launches.append((placeholder, launch))
        return placeholder

    def make(self, platform: Any, graph: Any, nodes: dict[int, Any],
             edges: list[tuple[Any, Any]]) -> dict[int, Any]:
        """Make them at the root of `graph`; returns `nodes` with each placeholder replaced
        by its node, and replaces them in `edges` in place. Empties the list."""
        pending, self._launches = self._launches, []
        if not pending:
            return nodes
        made = platform.add_kernels(graph, [launch for _, launch in pending])
        for (placeholder, _), node in zip(pending, made):
            placeholder.node = node
        edges[:] = [(_made(a), _made(b)) for a, b in edges]
        return {k: _made(g) for k, g in nodes.items()}


def _made(g: Any) -> Any:
    return g.node if type(g) is Pending else g
