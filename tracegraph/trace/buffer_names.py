"""What each buffer is called, for tg.visualize and messages: an argument by its path, a
captured array by the name a kernel found it by, a graph-owned array by the name= it was
made with, else by the result it is (`result[0]`), else by the kernel and parameter that
first write it (`scale.out`, `tg.ops.add.out`); a name given twice gets a count."""
from __future__ import annotations

import inspect
from collections import Counter
from dataclasses import replace
from typing import Any

from .. import _numba
from ..ir import TEMP, Buffer, Op, OpKind, OutputKind, OutputLeaf, View


def default_name(buffer: Buffer) -> bool:
    """Still called what the tracer called it when it made it (temp4)?"""
    return buffer.name == f"{buffer.kind}{buffer.id}"


def named(tracer: Any, outputs: list[OutputLeaf]) -> list[Buffer]:
    """The tracer's buffers, graph-owned ones made without name= named by the result they
    are (outputs, at tracer.result_paths) or the first kernel parameter writing them."""
    buffers, ops, paths, given = (tracer.buffers, tracer.ops, tracer.result_paths,
                                  tracer.given_names)
    names: dict[int, str] = {}
    for leaf, path in zip(outputs, paths):
        if leaf.kind == OutputKind.DEVICE and leaf.view is not None:
            names.setdefault(leaf.view.buffer, path)
    fills: dict[int, str] = {}  # what only a memset or copy writes: that op's name
    params: dict[int, tuple[str, ...]] = {}
    for op in _in_order(ops):
        for a in op.accesses:
            if a.writes and a.buffer not in names:
                if op.kind == OpKind.KERNEL:
                    names[a.buffer] = _writer(op, a.buffer, params)
                else:
                    fills.setdefault(a.buffer, op.name)
    names = {**fills, **names}
    renamed, seen = [], Counter[str]()
    for b in buffers:
        if b.kind == TEMP and b.id not in given and default_name(b) and b.id in names:
            name = names[b.id]
            seen[name] += 1
            renamed.append(replace(b, name=name if seen[name] == 1 else
                                   f"{name} ({seen[name]})"))
        else:
            renamed.append(b)
    return renamed


def _in_order(ops: list[Op]) -> list[Op]:
    """Ops and the ops of their control-flow bodies, in program order."""
    found = []
    for op in ops:
        found.append(op)
        if op.kind == OpKind.CONDITIONAL:
            for body in op.conditional.bodies:
                found += _in_order(list(getattr(body, "ops", body)))
    return found


def _writer(op: Op, buffer: int, params: dict[int, tuple[str, ...]]) -> str:
    """`kernel.parameter` of the op writing `buffer` (its name where not a kernel).
    `params`: each kernel's parameter names, as found (by id)."""
    if op.kind != OpKind.KERNEL:
        return op.name
    args = op.launch.args
    k = next((i for i, a in enumerate(args) if _holds(a, buffer)), None)
    kernel = op.launch.kernel
    if k is None or not _numba.is_kernel(kernel):
        return f"{op.name}.arg{k}" if k is not None else op.name
    names = params.get(id(kernel))
    if names is None:
        names = params[id(kernel)] = _parameters(_numba.kernel_py_func(kernel))
    param = names[k] if k < len(names) else f"{names[-1]}[{k - len(names) + 1}]" \
        if names and names[-1].startswith("*") else f"arg{k}"
    library = str(getattr(_numba.kernel_py_func(kernel), "__module__", "")).startswith(
        "tracegraph.ops")
    return f"{'tg.ops.' if library else ''}{op.name}.{param.lstrip('*')}"


def _parameters(func: Any) -> tuple[str, ...]:
    """A function's positional parameters, a `*args` one last as "*args"."""
    code = getattr(func, "__code__", None)
    if code is None:
        return ()
    names = code.co_varnames[:code.co_argcount]
    if code.co_flags & inspect.CO_VARARGS:
        names += ("*" + code.co_varnames[code.co_argcount + code.co_kwonlyargcount],)
    return tuple(names)


def _holds(arg: Any, buffer: int) -> bool:
    if isinstance(arg, View):
        return arg.buffer == buffer
    return isinstance(arg, tuple) and any(_holds(a, buffer) for a in arg)
