"""verify=: trace a call again and compare the new Program with the one its graph was
built from. Whatever would make the graph differ is compared, so a stale graph is never
replayed unseen: each op's kind, kernel (the same object, or the same code compiling in
the same values), launch configuration, arguments (scalars by type and value, arrays by
buffer, offset, shape, strides and dtype), accesses; the buffers (captured arrays by
address, host arrays copied in by contents); the results; the dependency edges."""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import _numba, config
from ..errors import StaleGraphError, TraceError
from ..ir import Buffer, BufferKind, Launch, Op, OpKind, Program, args_key
from ..location import user_location


def check_same(then: Program, now: Program, qualname: str) -> None:
    """Raise StaleGraphError naming the first difference between the traced Programs."""
    found = _ops_difference(then.ops, now.ops, "")
    if found is None:
        found = _program_difference(then, now)
    if found is None:
        return
    where, what, before, after = found
    raise StaleGraphError(
        f"{qualname}'s cached graph is stale: {what} was {before} when the graph was traced "
        f"and is {after} now (verify= traced the call again)", where=where or None,
        fix="declare the Python state it depends on with tg.compile(key=lambda: ...), or "
            "pass it to the function as an argument (a value that changes on every call: "
            "dynamic=); the stale graph is dropped, so the next call traces again")


def verify_every(verify: bool | int | None) -> int:
    """verify= as "every N-th call" (0: never); None takes TRACEGRAPH_VERIFY."""
    if verify is None:
        return config.verify_every()
    if verify is True:
        return 1
    if verify is False:
        return 0
    if not isinstance(verify, int) or verify < 0:
        raise TraceError(f"verify={verify!r} is neither True, False nor a count of calls",
                         where=user_location(4),
                         fix="pass verify=True (every call) or verify=N (every N-th call)")
    return verify


Found = tuple[str, str, str, str] | None  # (user's line, what differs, then, now)


def _ops_difference(then: tuple[Op, ...], now: tuple[Op, ...], inside: str) -> Found:
    for i, (a, b) in enumerate(zip(then, now)):
        found = _op_difference(a, b, f"{inside}op {i} ({a.describe()})")
        if found is not None:
            return found
    if len(then) != len(now):
        extra = (then if len(then) > len(now) else now)[min(len(then), len(now))]
        return (extra.location, f"{inside}the number of operations", str(len(then)),
                f"{len(now)} (first differing: {extra.describe()})")
    return None


def _op_difference(a: Op, b: Op, name: str) -> Found:
    where = b.location or a.location
    for what, x, y in ((f"{name}'s kind", a.kind, b.kind), (f"{name}'s name", a.name, b.name),
                       (f"{name}'s barrier", a.barrier, b.barrier)):
        if x != y:
            return (where, what, repr(x), repr(y))
    if isinstance(a.data, Launch) and isinstance(b.data, Launch):
        differs = _launch_difference(a.data, b.data, name)
        if differs is not None:
            return (where, *differs)
    elif a.kind == OpKind.CONDITIONAL:
        ca, cb = a.conditional, b.conditional
        if (ca.kind, ca.flag, ca.max_iterations, ca.counter, len(ca.bodies)) != \
                (cb.kind, cb.flag, cb.max_iterations, cb.counter, len(cb.bodies)):
            return (where, f"{name}'s condition", repr(ca.flag), repr(cb.flag))
        for k, (x, y) in enumerate(zip(ca.bodies, cb.bodies)):
            found = _ops_difference(x.ops, y.ops, f"{name} body {k}: ")
            if found is not None:
                return found
    elif _data_key(a) != _data_key(b):
        return (where, f"{name}'s data", repr(_data_key(a)), repr(_data_key(b)))
    if a.accesses != b.accesses:
        return (where, f"{name}'s memory accesses", repr(a.accesses), repr(b.accesses))
    return None


def _launch_difference(a: Launch, b: Launch, name: str) -> tuple[str, str, str] | None:
    if not _same_kernel(a.kernel, b.kernel):
        return (f"{name}'s kernel", repr(a.kernel), repr(b.kernel))
    for field in ("griddim", "blockdim", "sharedmem", "cooperative", "attributes"):
        x, y = getattr(a, field), getattr(b, field)
        if x != y:
            return (f"{name}'s {field}", repr(x), repr(y))
    for k, (x, y) in enumerate(zip(args_key(a.args), args_key(b.args))):
        if x != y:
            return (f"{name}'s argument {k}", _arg_shown(a.args[k]), _arg_shown(b.args[k]))
    if len(a.args) != len(b.args):
        return (f"{name}'s number of arguments", str(len(a.args)), str(len(b.args)))
    return None


def _same_kernel(a: Any, b: Any) -> bool:
    """The same kernel object (Numba keeps what it compiled in), or a kernel made again
    from the same code (defined inside the traced function) that compiles in the same
    values now as the old one would."""
    if a is b:
        return True
    code_a = getattr(_numba.kernel_py_func(a), "__code__", None)
    code_b = getattr(_numba.kernel_py_func(b), "__code__", None)
    if code_a is None or code_a is not code_b:
        return False
    then, now = _numba.compiled_in_values(a), _numba.compiled_in_values(b)
    return len(then) == len(now) and all(
        _numba.same_constant(ref.resolve(), snapshot)
        for (ref, _), (_, snapshot) in zip(now, then))


def _data_key(op: Op) -> Any:
    """What an op other than a launch or a conditional does, comparably (functions by
    their code: a lambda is made again by every trace)."""
    data = op.data
    if op.kind == OpKind.LIBRARY:
        return (_function_key(data.fn), args_key(data.args), data.may_be_empty)  # type: ignore[union-attr]
    if op.kind == OpKind.HOST:
        return _function_key(data.fn)  # type: ignore[union-attr]
    if op.kind in (OpKind.EVENT_RECORD, OpKind.EVENT_WAIT):
        return id(data.event)  # type: ignore[union-attr]
    return data


def _function_key(fn: Any) -> Any:
    code = getattr(fn, "__code__", None)
    return ("code", code) if code is not None else ("object", id(fn))


def _program_difference(then: Program, now: Program) -> Found:
    for a, b in zip(then.buffers, now.buffers):
        x, y = _buffer_key(a), _buffer_key(b)
        if x != y:
            return ("", f"buffer {a.name or a.id}", _buffer_shown(a), _buffer_shown(b))
    if len(then.buffers) != len(now.buffers):
        return ("", "the number of buffers", str(len(then.buffers)), str(len(now.buffers)))
    out_then = [(o.kind, o.input_index, o.view, args_key((o.value,))) for o in then.outputs]
    out_now = [(o.kind, o.input_index, o.view, args_key((o.value,))) for o in now.outputs]
    if out_then != out_now or then.output_tree != now.output_tree:
        return ("", "the results", repr(out_then), repr(out_now))
    if set(then.graph.edges) != set(now.graph.edges):
        return ("", "the dependency edges", repr(sorted(then.graph.edges)),
                repr(sorted(now.graph.edges)))
    return None


def _buffer_key(b: Buffer) -> Any:
    held: Any = None
    if b.kind == BufferKind.HOST_CONSTANT and isinstance(b.external, np.ndarray):
        held = (b.external.dtype.str, b.external.shape, b.external.tobytes())
    return (b.nbytes, b.kind, b.address, b.input_index, held)


def _buffer_shown(b: Buffer) -> str:
    if b.kind == BufferKind.EXTERNAL:
        return f"the device array at {b.address:#x} ({b.nbytes} bytes)"
    if b.kind == BufferKind.HOST_CONSTANT:
        return f"a copy of {np.array2string(np.asarray(b.external), threshold=8)}"
    return f"{b.kind} of {b.nbytes} bytes"


def _arg_shown(arg: Any) -> str:
    return f"{arg!r} ({type(arg).__name__})"
