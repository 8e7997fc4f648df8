"""Memory planning: graph-owned intermediates share bytes when the graph orders all uses
of one before all uses of the other, so the memory a graph needs is its largest set of
buffers live at once, not their sum."""
from __future__ import annotations

from dataclasses import replace

from ..ir import BufferKind, OutputKind, Program

ALIGN = 256  # the allocation alignment CUDA gives; planned buffers keep it


def plan_memory(program: Program) -> Program:
    """Requires: dependency edges (any graph with the same reachability).
    Guarantees: every graph-owned device buffer that is not a result (`temp`, `host_input`)
    gets `arena_offset`, its place in one arena of `Program.arena_bytes`; two buffers
    overlap there only if every op touching one is an ancestor, in the graph, of every op
    touching the other (so parallel branches never share); results keep their own memory
    (the caller may hold them).
    """
    users: dict[int, int] = {}  # buffer -> bitmask of the ops touching it
    for i, op in enumerate(program.ops):
        for a in op.accesses:
            users[a.buffer] = users.get(a.buffer, 0) | (1 << i)
    results = {o.view.buffer for o in program.outputs
               if o.kind in (OutputKind.HOST, OutputKind.DEVICE)}
    planned = [b for b in program.buffers if b.kind in (BufferKind.TEMP, BufferKind.HOST_INPUT)
               and b.id not in results and b.id in users and b.nbytes]
    if not planned:
        return program
    ancestors = _ancestors(program)
    slots: list[list[int]] = []  # [offset, size, bitmask of the ops of its occupants]
    offsets: dict[int, int] = {}
    for b in sorted(planned, key=lambda b: (_lowest(users[b.id]), b.id)):
        # what every op touching b comes after
        before = -1
        mask = users[b.id]
        while mask:
            low = mask & -mask
            before &= ancestors[low.bit_length() - 1]
            mask ^= low
        size = -(-b.nbytes // ALIGN) * ALIGN
        slot = min((s for s in slots if s[1] >= size and s[2] & ~before == 0),
                   key=lambda s: s[1], default=None)
        if slot is None:
            end = max((s[0] + s[1] for s in slots), default=0)
            slot = [end, size, 0]
            slots.append(slot)
        slot[2] |= users[b.id]
        offsets[b.id] = slot[0]
    arena = max(s[0] + s[1] for s in slots)
    buffers = tuple(replace(b, arena_offset=offsets[b.id]) if b.id in offsets else b
                    for b in program.buffers)
    return program.replace(buffers=buffers, arena_bytes=arena)


def _ancestors(program: Program) -> list[int]:
    """Per op, the bitmask of the ops ordered before it (program order is topological)."""
    g = program.graph
    out: list[int] = []
    for v in range(len(program.ops)):
        mask = 0
        for p in g.predecessors(v):
            mask |= out[p] | (1 << p)
        out.append(mask)
    return out


def _lowest(mask: int) -> int:
    return (mask & -mask).bit_length() - 1


def unplanned_bytes(program: Program) -> int:
    """What the planned buffers would take in allocations of their own (each aligned)."""
    return sum(-(-b.nbytes // ALIGN) * ALIGN for b in program.buffers
               if b.arena_offset is not None)
