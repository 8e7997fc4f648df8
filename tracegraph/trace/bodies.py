"""Finishing the bodies of device-side control flow after a trace: each body becomes a
Program of its own (over the same buffers), and the caller's device arrays a body or a
library call uses are copied into graph memory around it, because the graph re-points
moved inputs only in its own kernel and copy nodes (not inside bodies, not inside the
child graph a library call is captured into)."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..ir import (
    Access,
    BufferKind,
    Conditional,
    Copy,
    CopyRole,
    Fill,
    Launch,
    LibraryCall,
    Op,
    OpKind,
    Program,
    View,
    op_graph,
)


def body_buffers(ops: list[Op] | tuple[Op, ...], libraries: bool = True) -> set[int]:
    """Buffers a node the graph never re-points touches: a library call's (with
    `libraries`: the cuda backend captures it again when a device input moves, but a held
    result is moved by re-pointing alone), and those of the ops inside a body (at any
    depth), with a construct's flag (and a loop's counter), which the helper nodes that
    set the condition read at a fixed address."""
    found: set[int] = set()
    for op in ops:
        if op.kind == OpKind.LIBRARY and libraries:
            found.update(a.buffer for a in op.accesses)
        if op.kind == OpKind.CONDITIONAL:
            c = op.conditional
            found.add(c.flag.buffer)
            if c.counter is not None:
                found.add(c.counter.buffer)
            for body in c.bodies:
                for inner in body:
                    found.update(a.buffer for a in inner.accesses)
    return found


def shadow_inputs(tracer: Any, ops: list[Op]) -> list[Op]:
    """Device input buffers used inside bodies get a graph-owned shadow: a copy in before
    each construct that uses them, a copy back after it if it writes them. (A top-level
    library call uses the caller's arrays themselves: it is captured again on a move.)"""
    used = {b for b in body_buffers(ops, libraries=False)
            if tracer.buffers[b].kind == BufferKind.DEVICE_INPUT}
    if not used:
        return ops
    shadows = {b: tracer.new_buffer(tracer.buffers[b].nbytes, BufferKind.TEMP,
                                    f"{tracer.buffers[b].name} (shadow)") for b in used}
    out: list[Op] = []
    for op in ops:
        if op.kind not in _FIXED or not used & {a.buffer for a in op.accesses}:
            out.append(op)
            continue
        mine = sorted(used & {a.buffer for a in op.accesses})
        for b in mine:
            n = tracer.buffers[b].nbytes
            out.append(_copy(shadows[b], b, n, op.location))
        out.append(remap(op, shadows))
        for b in mine:
            if any(a.writes for a in op.accesses if a.buffer == b):
                out.append(_copy(b, shadows[b], tracer.buffers[b].nbytes, op.location))
    return out


_FIXED = (OpKind.CONDITIONAL,)  # ops whose nodes are never re-pointed


def _copy(dst: int, src: int, nbytes: int, where: str) -> Op:
    import numpy as np
    d = View(dst, 0, (nbytes,), (1,), np.dtype(np.uint8))
    s = View(src, 0, (nbytes,), (1,), np.dtype(np.uint8))
    return Op(OpKind.MEMCPY, "copy for a body", (Access(dst, 0, nbytes, "w"),
                                                 Access(src, 0, nbytes, "r")), where,
              Copy(d, s, CopyRole.USER))


def remap(op: Op, mapping: dict[int, int]) -> Op:
    """`op` with buffers renamed (views, accesses, bodies)."""
    accesses = tuple(replace(a, buffer=mapping.get(a.buffer, a.buffer)) for a in op.accesses)
    data = op.data
    if isinstance(data, Launch):
        data = replace(data, args=tuple(_remap_arg(a, mapping) for a in data.args))
    elif isinstance(data, Copy):
        data = replace(data, dst=_view(data.dst, mapping), src=_view(data.src, mapping))
    elif isinstance(data, Fill):
        data = replace(data, dst=_view(data.dst, mapping))
    elif isinstance(data, LibraryCall):
        data = replace(data, args=tuple(_remap_arg(a, mapping) for a in data.args))
    elif isinstance(data, Conditional):
        data = replace(data, flag=_view(data.flag, mapping),
                       counter=_view(data.counter, mapping) if data.counter else None,
                       bodies=tuple(tuple(remap(o, mapping) for o in body)
                                    for body in data.bodies))
    return replace(op, accesses=accesses, data=data)


def _view(v: View, mapping: dict[int, int]) -> View:
    return replace(v, buffer=mapping.get(v.buffer, v.buffer))


def _remap_arg(a: Any, mapping: dict[int, int]) -> Any:
    if isinstance(a, View):
        return _view(a, mapping)
    if isinstance(a, tuple):
        items = [_remap_arg(x, mapping) for x in a]
        return type(a)(*items) if hasattr(a, "_fields") else tuple(items)
    return a


def as_programs(ops: list[Op] | tuple[Op, ...], buffers: tuple, name: str) -> tuple[Op, ...]:
    """Each construct's bodies as Programs over `buffers` (at every depth)."""
    out = []
    for op in ops:
        if op.kind == OpKind.CONDITIONAL:
            c = op.conditional
            bodies = tuple(_program(as_programs(body, buffers, name), buffers, name)
                           for body in c.bodies)
            op = replace(op, data=replace(c, bodies=bodies))
        out.append(op)
    return tuple(out)


def _program(ops: tuple[Op, ...], buffers: tuple, name: str) -> Program:
    return Program(f"{name} (body)", ops, buffers, (), None, (), None, op_graph(ops))
