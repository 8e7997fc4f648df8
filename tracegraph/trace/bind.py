"""Tracing a whole function: its arguments become input buffers and traced stand-ins, the
function runs once with the tracer active, its results are bound, and written NumPy
inputs get their write-backs."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from .. import _numba, pytree, side_effects
from ..errors import TraceError
from ..ir import (
    DEVICE_INPUT,
    EXTERNAL,
    HOST_INPUT,
    STAGING,
    TEMP,
    Buffer,
    Copy,
    CopyRole,
    InputKind,
    InputLeaf,
    OpKind,
    OutputKind,
    OutputLeaf,
    Program,
    View,
    bytes_view,
    op_graph,
)
from ..location import definition_location, user_location
from ..signature import arguments
from ..traced import Array, DynamicScalar
from . import buffer_names
from .bodies import as_programs, body_buffers, shadow_inputs
from .tracer import Tracer

# ---------------------------------------------------------------------------
# tracing a whole function

def trace_function(fn: Callable, leaves: list[Any], paths: list[str], tree: Any,
                   infos: list[arguments.ArrayInfo | None],
                   groups: list[tuple[int, int] | None],
                   scalars: frozenset[int] = frozenset()) -> Program:
    """Run `fn` once on traced stand-ins for its array arguments; return the Program.

    `leaves` are the flattened arguments (tree rebuilds (args, kwargs) from the first of
    them; one more is the true length of a dynamic call, which tg.length() stands for),
    `infos` their ArrayInfo (None for other values), `groups` which of them share memory,
    `scalars` the leaves that are dynamic scalars.
    """
    name = getattr(fn, "__qualname__", getattr(fn, "__name__", "fn"))
    tracer = Tracer(name)
    inputs, stand_ins = _bind_inputs(tracer, leaves, paths, infos, groups, scalars)
    n_prologue = len(tracer.ops)
    side_effects.warn_side_effects(fn, name)
    previous = _numba.set_tracer(tracer)
    try:
        args, kwargs = pytree.unflatten(tree, stand_ins[:pytree.leaf_count(tree)])
        tracer.call = (fn, args, kwargs)
        tracer.length = stand_ins[-1] if len(stand_ins) > pytree.leaf_count(tree) else None
        result = fn(*args, **kwargs)
    finally:
        _numba.set_tracer(previous)
    tracer.check_bindings(definition_location(fn))
    if len(tracer.ops) == n_prologue and not tracer.launches:
        raise TraceError(f"the traced function {name} launched nothing",
                         where=definition_location(fn),
                         fix="launch at least one kernel (or tg.ops call) inside it, or call "
                             "it without @tg.compile")
    device_mode = any(i is not None and i.placement == arguments.DEVICE for i in infos)
    tracer.ops = shadow_inputs(tracer, tracer.ops)
    outputs, out_tree = _bind_outputs(tracer, result, inputs, device_mode, name, fn, stand_ins)
    inputs = _mark_written_and_write_back(tracer, inputs)
    _refuse_constants_after_host_writes(tracer, inputs, infos)
    _refuse_compiled_in_after_host_writes(tracer, inputs, infos, leaves)
    tracer.buffers = buffer_names.named(tracer, outputs)
    ops = as_programs(tracer.ops, tuple(tracer.buffers), name)
    return Program(name, ops, tuple(tracer.buffers), tuple(inputs), tree, tuple(outputs),
                   out_tree, op_graph(ops), device_mode,
                   aliased_inputs(tracer.buffers, inputs, infos),
                   combines=tuple(tracer.combines), bindings=tracer.bindings)


def aliased_inputs(buffers: tuple[Buffer, ...] | list[Buffer], inputs: list[InputLeaf],
                   infos: list[arguments.ArrayInfo | None]) -> frozenset[tuple[int, int]]:
    """(device input buffer, captured buffer) pairs whose bytes overlap in this call."""
    captured = [(b.address, b.address + b.nbytes, b.id) for b in buffers
                if b.kind == EXTERNAL and b.nbytes]
    if not captured:
        return frozenset()
    pairs: set[tuple[int, int]] = set()
    for inp in inputs:
        if inp.kind != "array" or inp.staging is not None:
            continue
        info = infos[inp.index]
        assert info is not None
        lo, hi = info.extent
        pairs.update((inp.buffer, b) for x, y, b in captured if x < hi and lo < y)
    return frozenset(pairs)


def overlap_said(program: Any, call: Any) -> str:
    """How the call's device inputs overlap the captured arrays unlike the compiled call's."""
    pairs = aliased_inputs(program.buffers, list(program.inputs), call.infos)
    changed = sorted(pairs ^ program.aliased_inputs)
    said = []
    for device_input, captured in changed:
        arg = next((i.path for i in program.inputs if i.kind == "array"
                    and i.buffer == device_input), "?")
        now = (device_input, captured) in pairs
        said.append(f"argument {arg} {'overlaps' if now else 'no longer overlaps'} the "
                    f"device array {program.buffers[captured].name} that a kernel captures "
                    "(a global or closure variable), unlike in the compiled call")
    return "; ".join(said) or "a device argument overlaps a captured array differently"


def _bind_inputs(tracer: Tracer, leaves: list, paths: list[str], infos: list,
                 groups: list, scalars: frozenset[int]) -> tuple[list[InputLeaf], list[Any]]:
    inputs: list[InputLeaf] = []
    stand_ins: list[Any] = []
    group_buffers: dict[int, tuple[int, int | None]] = {}
    # a group's buffer spans the union of its members' bytes
    spans: dict[int, int] = {}
    for info, g in zip(infos, groups):
        if info is not None:
            lo, hi = info.extent
            spans[g[0]] = max(spans.get(g[0], 0), g[1] + hi - lo)
    for i, (leaf, path, info, g) in enumerate(zip(leaves, paths, infos, groups)):
        if info is None:
            if isinstance(leaf, Array):
                raise TraceError(f"argument {path} is a traced array from another trace",
                                 where=user_location(4),
                                 fix="pass real arrays to compiled functions")
            if i in scalars:  # dynamic: a kernel parameter patched on every call
                inputs.append(InputLeaf(i, path, InputKind.SCALAR, value=leaf))
                stand_ins.append(DynamicScalar(i, path, leaf))
                continue
            inputs.append(InputLeaf(i, path, InputKind.STATIC, value=leaf))
            stand_ins.append(leaf)
            continue
        problem = _numba.dtype_problem(info.dtype)
        if problem is not None:
            raise TraceError(f"argument {path} is an array of dtype {info.dtype}, which cannot "
                             f"be passed to a CUDA kernel: {problem}", where=user_location(4),
                             fix="pass an array of a numeric, boolean, datetime or record dtype")
        first, delta = g
        if first not in group_buffers:
            nbytes = spans[first]
            if info.placement == arguments.HOST:
                staging = tracer.new_buffer(nbytes, STAGING, f"{path} (pinned)", input_index=i)
                buf = tracer.new_buffer(nbytes, HOST_INPUT, path, input_index=i)
                tracer.copy(bytes_view(buf, 0, nbytes), bytes_view(staging, 0, nbytes),
                            f"copy in {path}", CopyRole.INPUT)
            else:
                staging = None
                buf = tracer.new_buffer(nbytes, DEVICE_INPUT, path, input_index=i)
            group_buffers[first] = (buf, staging)
        buf, staging = group_buffers[first]
        lo, _ = info.extent
        view = View(buf, delta + info.ptr - lo, tuple(info.shape), tuple(info.strides), info.dtype,
                    info.readonly)
        inputs.append(InputLeaf(i, path, InputKind.ARRAY, info.placement, view.shape, info.dtype,
                                view.strides, buf, staging, view))
        stand_ins.append(Array(tracer, view))
    return inputs, stand_ins


def _bind_outputs(tracer: Tracer, result: Any, inputs: list[InputLeaf], device_mode: bool,
                  name: str, fn: Callable, stand_ins: list[Any]) -> tuple[list[OutputLeaf], Any]:
    leaves, paths, tree = pytree.flatten(result, "result")
    tracer.result_paths = paths
    # an input handed back is that input (two arguments may be the same memory)
    by_id = {id(a): i for i, a in enumerate(stand_ins) if isinstance(a, Array)}
    by_view: dict[View, int] = {}
    for inp in inputs:
        if inp.kind == "array":
            by_view.setdefault(inp.view, inp.index)
    outputs: list[OutputLeaf] = []
    copied: dict[int, list[tuple[int, View, str]]] = {}  # results to copy out, per buffer
    in_bodies = body_buffers(tracer.ops)
    # views of an argument: of the caller's array, unless it may be a padded copy of it
    holder = {} if tracer.length is not None else {
        inp.view.buffer: inp for inp in reversed(inputs) if inp.kind == "array"}
    for leaf, path in zip(leaves, paths):
        if isinstance(leaf, Array):
            view = tracer.view_of(leaf)
            index = by_id.get(id(leaf), by_view.get(view))
            if index is not None:
                outputs.append(OutputLeaf(OutputKind.INPUT, input_index=index))
                continue
            buffer = tracer.buffers[view.buffer]
            as_view = _argument_view(holder.get(view.buffer), buffer, view)
            if as_view is not None:
                outputs.append(as_view)
                continue
            # a result handed out as it is: not one a body touches (the graph moves held
            # results to other memory by re-pointing, outside bodies only)
            if device_mode and buffer.kind in (TEMP, EXTERNAL) and view.buffer not in in_bodies:
                outputs.append(OutputLeaf(OutputKind.DEVICE, view=view))
                continue
            copied.setdefault(view.buffer, []).append((len(outputs), view, path))
            outputs.append(None)  # type: ignore[arg-type]  # _copy_out fills it in
        elif isinstance(leaf, DynamicScalar):  # the call's own value, as eagerly
            outputs.append(OutputLeaf(OutputKind.INPUT, input_index=leaf.leaf))
        elif (info := arguments.describe(leaf)) is not None and info.placement == "device":
            # neither received nor made (a global): itself, as eagerly; its name is checked
            tracer.view_or_external(leaf)
            outputs.append(OutputLeaf(OutputKind.STATIC, value=leaf))
        elif isinstance(leaf, np.ndarray) or info is not None:
            raise TraceError(f"{name} returned a host array at {path} that is neither one of "
                             "its arguments nor made by the graph (a NumPy array made or named "
                             "while tracing): a replay cannot make it again",
                             where=definition_location(fn), fix="return arrays made in it, "
                             "its arguments or device arrays; make host arrays outside it")
        else:
            outputs.append(OutputLeaf(OutputKind.STATIC, value=leaf))
    for results in copied.values():
        for group in _overlapping(results):
            _copy_out(tracer, group, outputs, device_mode, fn)
    return outputs, tree


def _overlapping(results: list[tuple[int, View, str]]) -> list[list[tuple[int, View, str]]]:
    """Results over one buffer, in groups whose byte ranges overlap (chained): each group is
    one copy, and views that share no byte stay copies of their own (no gap copied)."""
    groups: list[list[tuple[int, View, str]]] = []
    stop = -1
    for r in sorted(results, key=lambda r: r[1].byte_range()):
        lo, hi = r[1].byte_range()
        if groups and lo < stop:
            groups[-1].append(r)
            stop = max(stop, hi)
        else:
            groups.append([r])
            stop = hi
    return groups


def _copy_out(tracer: Tracer, results: list[tuple[int, View, str]], outputs: list,
              device_mode: bool, fn: Callable) -> None:
    """Overlapping results over one buffer, copied out once: into pinned memory for NumPy
    results, into fresh device memory for views of a caller's array (which the caller may
    reuse). The copy spans them all, so they share memory as they did in the function (an
    array returned twice is one result twice)."""
    start = min(v.byte_range()[0] for _, v, _ in results)
    stop = max(v.byte_range()[1] for _, v, _ in results)
    paths = ", ".join(dict.fromkeys(p for _, _, p in results))
    dst = tracer.new_buffer(stop - start, TEMP if device_mode else STAGING, paths)
    source = results[0][1].buffer
    tracer.copy(bytes_view(dst, 0, stop - start), bytes_view(source, start, stop - start),
                f"copy out {paths}", CopyRole.OUTPUT, definition_location(fn))
    kind = OutputKind.DEVICE if device_mode else OutputKind.HOST
    for index, view, _ in results:
        outputs[index] = OutputLeaf(kind, view=View(dst, view.offset - start, view.shape,
                                                    view.strides, view.dtype))


def _argument_view(held: InputLeaf | None, buffer: Buffer, view: View) -> OutputLeaf | None:
    """A result over an argument's memory, as a view of the caller's array (INPUT_VIEW);
    None where it stays a copy: a device view with a negative stride (a Numba device array
    over the caller's memory for one has not been checked on a GPU)."""
    if held is None or not (buffer.kind == HOST_INPUT or (
            buffer.kind == DEVICE_INPUT and min(view.strides, default=0) >= 0)):
        return None
    return OutputLeaf(OutputKind.INPUT_VIEW, input_index=held.index, view=view,
                      value=view.offset - held.view.offset)


def _kernels(ops: Any) -> list[Any]:
    """The kernel objects launched by `ops` and by the bodies of their control flow."""
    found: dict[int, Any] = {}
    stack = list(ops)
    while stack:
        op = stack.pop()
        if op.kind == OpKind.KERNEL:
            found.setdefault(id(op.launch.kernel), op.launch.kernel)
        elif op.kind == OpKind.CONDITIONAL:
            for body in op.conditional.bodies:  # ops while tracing, Programs after
                stack += getattr(body, "ops", body)
    return list(found.values())


def _refuse_constants_after_host_writes(tracer: Tracer, inputs: list[InputLeaf],
                                        infos: list[arguments.ArrayInfo | None]) -> None:
    """cuda.to_device (or copy_to_device) of host memory a NumPy argument shares, after a
    kernel wrote that argument: eager Numba copies the argument back right after the launch,
    so the copy sees the new values; the graph writes it back only at its end."""
    for inp in inputs:
        info = infos[inp.index]
        if inp.written and inp.placement == arguments.HOST and info is not None:
            where = constant_after_write(tracer.ops, tracer.buffers, inp.buffer, info.extent)
            if where is not None:
                raise constant_after_write_error(inp.path, where)


def _refuse_compiled_in_after_host_writes(tracer: Tracer, inputs: list[InputLeaf],
                                          infos: list[arguments.ArrayInfo | None],
                                          leaves: list[Any]) -> None:
    """A host array a kernel compiles in (a global it reads) sharing memory with a NumPy
    argument an earlier op wrote: eager Numba copied the argument back before that
    kernel's first launch compiled (or, simulated, read) the array; the graph writes it
    back only at its end."""
    named = tracer.compiled_in.host_arrays()
    for inp in inputs:
        info = infos[inp.index]
        if not (inp.written and inp.placement == arguments.HOST and info is not None):
            continue
        argument = leaves[inp.index]
        reading = {id(op): (name, where) for op, name, where, arrays in named
                   if any(_shares_bytes(a, argument) for a in arrays)}
        if not reading:
            continue
        for op, written in _after_writes(tracer.ops, inp.buffer):
            if id(op) in reading and written:
                name, where = reading[id(op)]
                raise TraceError(f"kernel {name} reads, as a global, host memory that "
                                 f"argument {inp.path} shares, after a kernel wrote "
                                 f"{inp.path}: eager Numba copies {inp.path} back after that "
                                 "launch, the graph only at its end", where=where,
                                 fix=f"pass {inp.path} to the kernel as an argument, or a "
                                     "device array")


def _shares_bytes(array: np.ndarray, argument: Any) -> bool:
    """Do two host arrays share a byte (where that is too costly to tell: taken as yes)?"""
    try:
        return bool(np.shares_memory(array, argument,
                                     max_work=1 << 20))  # type: ignore[arg-type]
    except np.exceptions.TooHardError:
        return True
    except TypeError:  # not an array NumPy reads
        return False


def _after_writes(ops: Any, buffer: int) -> Any:
    """(op, whether an op before it wrote `buffer`) in program order, the ops of
    control-flow bodies in their place; the input copies that fill it do not count."""
    written = False
    for op in _in_order(ops):
        yield op, written
        if not (isinstance(op.data, Copy) and op.data.role == CopyRole.INPUT):
            written = written or any(a.buffer == buffer and a.writes and a.stop > a.start
                                     for a in op.accesses)


def _in_order(ops: Any) -> Any:
    for op in ops:
        yield op
        if op.kind == OpKind.CONDITIONAL:
            for body in op.conditional.bodies:  # ops while tracing, Programs after
                yield from _in_order(getattr(body, "ops", body))


def constant_after_write(ops: Any, buffers: Any, buffer: int,
                         extent: tuple[int, int]) -> str | None:
    """Where a host array overlapping host memory `extent` is copied in (a HOST_CONSTANT
    copy) after an op wrote input `buffer`; None where none is."""
    for op, written in _after_writes(ops, buffer):
        data = op.data
        if written and isinstance(data, Copy) and data.role == CopyRole.CONSTANT:
            held = arguments.describe(buffers[data.src.buffer].external)
            if held is not None and held.extent[0] < extent[1] and \
                    extent[0] < held.extent[1]:
                return op.location
    return None


def constant_after_write_error(path: str, where: str) -> TraceError:
    return TraceError(f"a host array sharing memory with argument {path} is copied to the "
                      f"device after a kernel wrote {path}: eager Numba copies {path} back "
                      "after that launch, the graph only at its end", where=where,
                      fix=f"copy {path} itself (it is already on the device inside the "
                          "graph), or pass the data as a device array")


def _mark_written_and_write_back(tracer: Tracer, inputs: list[InputLeaf]) -> list[InputLeaf]:
    """Flag the inputs whose bytes some op writes; copy written NumPy input buffers back to
    pinned staging (the backends copy a written leaf's own elements from there into the
    caller's array: never the bytes between a strided view's elements)."""
    writes: dict[int, list[tuple[int, int]]] = {}
    for op in tracer.ops:
        if isinstance(op.data, Copy) and op.data.role == CopyRole.INPUT:
            continue
        for a in op.accesses:
            if a.writes and a.stop > a.start:
                writes.setdefault(a.buffer, []).append((a.start, a.stop))
    copied_back = set()
    out = []
    for inp in inputs:
        if inp.kind != "array":
            out.append(inp)
            continue
        lo, hi = inp.view.byte_range()
        is_written = any(s < hi and lo < e for s, e in writes.get(inp.buffer, ()))
        if is_written and not inp.view.readonly and inp.placement == arguments.HOST and \
                inp.buffer not in copied_back:
            copied_back.add(inp.buffer)
            n = tracer.buffers[inp.buffer].nbytes
            assert inp.staging is not None  # a host input
            tracer.copy(bytes_view(inp.staging, 0, n), bytes_view(inp.buffer, 0, n),
                        f"write back {inp.path}", CopyRole.WRITE_BACK)
        out.append(replace(inp, written=is_written))
    return out
