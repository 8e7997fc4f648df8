"""Elementwise fusion: a producer's elementwise launch whose result only its consumer reads
is computed inside the consumer's kernel, with the same arithmetic, so the result is the
same bit for bit and the intermediate array is never written.

The rule, for launches of tracegraph.ops' elementwise kernels (or kernels this pass made):
producer P writes view V of a graph-owned intermediate; consumer C, a later elementwise
launch over the same 4-D shape, reads V as one or more of its operands (exactly V); and
- nothing between P and C touches V's bytes, writes what P reads, or is other than a
  kernel, library call, copy or fill (no host callback, event, control flow, barrier);
- nothing after C touches V's bytes, unless C writes V itself (`ops.relu(t, out=t)`);
- P's arrays are apart from C's output, or exactly it (P moves to C's place: an element
  is read and written by one thread, as inside each op);
- V is not a result, P and C ask for the same node attributes;
- P's value is not a floating-point product (multiply, gelu): a consumer adding it in one
  kernel may be compiled to an fma (NVVM contracts by default), rounding once where the
  two kernels rounded twice.
The fused kernel (ops/fused.py) computes P's expression per element, converts it to V's
dtype as the store did, and feeds it to C's. cuBLAS epilogues are not fused in: a
cuBLASLt product with an epilogue need not round as the separate product and add do.
"""
from __future__ import annotations

from typing import Any

from .. import config
from ..ir import Access, BufferKind, Launch, Op, OpKind, Program, View, op_graph
from ..ir.memory import memory_regions, region_access

_BETWEEN = (OpKind.KERNEL, OpKind.LIBRARY, OpKind.MEMCPY, OpKind.MEMSET)
MAX_PARAMS = 24  # arrays and scalars of one fused kernel


def fuse_elementwise(program: Program) -> Program:
    """Requires: ops in program order (it runs before the dependencies are found).
    Guarantees: the same Program where fusable producer/consumer pairs of elementwise
    launches (the module's rule) are one launch at the consumer's place; the producer's
    op is gone, its intermediate untouched. On with TRACEGRAPH_FUSE=1."""
    if not config.fusion():
        return program
    from ..ops import fused
    ops: list[Op | None] = list(program.ops)
    found: dict[int, Any] = {}
    for i, op in enumerate(ops):
        if op is not None and op.kind == OpKind.KERNEL and isinstance(op.data, Launch):
            e = fused.describe(op.data)
            if e is not None:
                found[i] = e
    if len(found) < 2:
        return program
    results = {o.view.buffer for o in program.outputs if o.view.buffer >= 0}
    regions = memory_regions(program.buffers, program.aliased_inputs)
    state = _Uses(ops, regions)
    changed = False
    for j in sorted(found):
        while True:
            pair = _producer(ops, state, found, j, program, results)
            if pair is None:
                break
            i, view, producer, consumer = pair
            joined = fused.join(producer, consumer, view)
            if joined.chain.arrays + joined.chain.scalars > MAX_PARAMS:
                break
            before, after = ops[i], ops[j]
            assert before is not None and after is not None  # both still in the program
            made = _fused_op(before, after, joined, fused.kernel(joined.chain),
                             fused.launch_args(joined))
            ops[j] = made
            state.replace(i, j, made)
            found[j] = joined
            ops[i] = None
            del found[i]
            changed = True
    if not changed:
        return program
    kept = tuple(op for op in ops if op is not None)
    return program.replace(ops=kept, graph=op_graph(kept))


class _Uses:
    """Each op's accesses in region coordinates, and the ops touching each region."""

    def __init__(self, ops: list, regions: dict):
        self.regions = regions
        self.touches: list[tuple[Access, ...]] = []
        self.users: dict[int, set[int]] = {}
        for k, op in enumerate(ops):
            self.touches.append(())
            self._add(k, op)

    def _add(self, k: int, op: Op) -> None:
        self.touches[k] = tuple(region_access(a, self.regions) for a in op.accesses)
        for a in self.touches[k]:
            self.users.setdefault(a.buffer, set()).add(k)

    def replace(self, gone: int, k: int, op: Op) -> None:
        for a in self.touches[gone] + self.touches[k]:
            self.users[a.buffer].discard(gone)
            self.users[a.buffer].discard(k)
        self.touches[gone] = ()
        self._add(k, op)

    def span(self, view: View) -> Access:
        return region_access(Access(view.buffer, *view.byte_range(), "r"), self.regions)

    def touching(self, span: Access) -> list[int]:
        """The ops touching bytes of `span`, in program order."""
        return sorted(k for k in self.users.get(span.buffer, ())
                      if any(a.overlaps(span) for a in self.touches[k]))


def _producer(ops: list, uses: _Uses, found: dict, j: int, program: Program,
              results: set[int]) -> tuple[int, View, Any, Any] | None:
    """(i, V, P, C): a producer launch i whose output V consumer j may compute in place of
    reading it, by the module's rule, with both described over one shape; None if there
    is none."""
    from ..ops import fused
    for view in dict.fromkeys(found[j].arrays):
        if program.buffers[view.buffer].kind != BufferKind.TEMP or view.buffer in results:
            continue
        span = uses.span(view)
        touching = uses.touching(span)
        before = [k for k in touching if k < j]
        if not before or before[-1] not in found:
            continue
        i = before[-1]
        if fused.ends_in_product(found[i]):
            continue
        common = _common_shape(found[i], found[j], view)
        if common is None:
            continue
        producer, consumer, view = common
        # the consumer reads V's bytes only as V, and writes them all or none
        if any(_overlaps(v, view) and v != view for v in consumer.arrays) or \
                (_overlaps(consumer.out, view) and consumer.out != view):
            continue
        if consumer.out != view and any(k > j for k in touching):
            continue  # V is read later: its values are needed
        if not _between_ok(ops, uses, i, j):
            continue
        if any(_overlaps(v, consumer.out) and v != consumer.out for v in producer.arrays):
            continue
        if ops[i].data.attributes != ops[j].data.attributes:
            continue
        return i, view, producer, consumer
    return None


def _common_shape(producer: Any, consumer: Any, view: View) -> tuple | None:
    """(producer, consumer, V) over one 4-D shape: the producer's launch over the
    consumer's, or the consumer's over the producer's, where the producer's output is then
    exactly the consumer's operand V; None where neither is."""
    from ..ops import fused
    p = fused.reshaped(producer, tuple(view.shape))
    if p is not None and p.out == view:
        return p, consumer, view
    c = fused.reshaped(consumer, tuple(producer.out.shape))
    if c is None:
        return None
    index = consumer.arrays.index(view)
    if c.arrays[index] != producer.out:
        return None
    return producer, c, producer.out


def _between_ok(ops: list, uses: _Uses, i: int, j: int) -> bool:
    """Nothing between the producer and the consumer writes what the producer reads, or is
    a host callback, event, control flow or barrier (what touches V was checked)."""
    reads = [a for a in uses.touches[i] if a.reads]
    for k in range(i + 1, j):
        op = ops[k]
        if op is None:
            continue
        if op.kind not in _BETWEEN or op.barrier:
            return False
        if any(a.writes and a.overlaps(r) for a in uses.touches[k] for r in reads):
            return False
    return True


def _overlaps(a: View, b: View) -> bool:
    if a.buffer != b.buffer or a.size == 0 or b.size == 0:
        return False
    (a0, a1), (b0, b1) = a.byte_range(), b.byte_range()
    return a0 < b1 and b0 < a1


def _fused_op(producer: Op, consumer: Op, joined: Any, kernel: Any, args: tuple) -> Op:
    launch = consumer.launch
    reads = {(v.buffer, *v.byte_range()) for v in joined.arrays}
    out = (joined.out.buffer, *joined.out.byte_range())
    accesses = tuple(Access(b, lo, hi, "rw" if (b, lo, hi) == out else "r")
                     for b, lo, hi in sorted(reads))
    if out not in reads:
        accesses += (Access(out[0], out[1], out[2], "w"),)
    data = Launch(kernel, launch.griddim, launch.blockdim, 0, args,
                  attributes=launch.attributes)
    return Op(OpKind.KERNEL, f"{producer.name}+{consumer.name}", accesses,
              consumer.location, data)
