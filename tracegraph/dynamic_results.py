"""What a dynamic function's results are at a call's length. dynamic.py traces the function
again at other lengths (only traced, nothing is compiled); here those traces become rules:
per array result, the axes of max(0, a * n + b) elements (a slice clips at 0, as it does
eagerly); per Python int result (x.shape[0], x.size), a * n + b; every other result must
not change with the length. A rule is fitted from the bucket's length L and two lengths
above it, then checked at the smallest lengths the bucket serves and where a rule reaches
0. A result that breaks its rule, runs backwards along a dynamic axis, or is a fixed-size
view that moves with the length (indexing from the end) is a TraceError at compile time.
After a padded run, `cut` applies the rules to the call's length.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from . import pytree
from .errors import TraceError
from .ir import Copy, CopyRole, OutputKind, ScalarArg, View
from .location import user_location

Rule = tuple[int, int, int]  # (axis, a, b): the axis has max(0, a * n + b) elements
Line = tuple[int, int]       # (a, b): a Python int result is a * n + b
LOW_PROBES = 2               # lengths traced at the bottom of a bucket's range...
LOW_TRIES = 4                # ...out of at most this many (a function may fail at 0)


class ResultRules(tuple[tuple[Rule, ...], ...]):
    """Per result leaf, its dynamic axes (the tuple itself: Compiled.dynamic_axes); `values`:
    per leaf, the line of a Python int result that follows the length, else None;
    `failed`: lengths the bucket serves at which the function does not trace -> why."""
    values: tuple[Line | None, ...]
    failed: dict[int, str]
    name: str
    bucket: int
    lo: int  # the smallest length the bucket serves

    @classmethod
    def make(cls, axes: list[tuple[Rule, ...]], values: list[Line | None], name: str,
             bucket: int, lo: int) -> ResultRules:
        rules = cls(axes)
        rules.values, rules.failed, rules.name = tuple(values), {}, name
        rules.bucket, rules.lo = bucket, lo
        return rules


def fit(program: Any, bucket: int, lo: int, lengths: tuple[int, int], probes: list,
        traced_at: Callable[[int], Any]) -> ResultRules:
    """The rules of `program` (traced at `bucket`) from its `probes` at `lengths` above the
    bucket, checked at lengths from `lo` (the smallest the bucket serves) by `traced_at`."""
    steps = [n - bucket for n in lengths]
    seen = (bucket, *lengths)
    paths = _paths(program)
    axes: list[tuple[Rule, ...]] = []
    values: list[Line | None] = []
    for k, out in enumerate(program.outputs):
        others = [_output(p, k) for p in probes]
        if any(o is None or _static(o) != _static(out) for o in others):
            shapes = [_shape(program, out), *(_shape(p, o) for p, o in zip(probes, others))]
            raise _not_affine(program.name, paths[k], list(zip(seen, shapes)))
        if _static(out):
            values.append(_fit_value(program.name, paths[k], out.value,
                                     [o.value for o in others], steps, seen))
            axes.append(())
            continue
        axes.append(_fit_axes(program, k, probes, steps, seen, paths[k]))
        values.append(None)
        if not axes[-1]:
            for p in probes:
                _check_place(program, p, k, paths[k], seen)
    rules = ResultRules.make(axes, values, program.name, bucket, lo)
    _check_served(program, rules, traced_at, paths)
    return rules


def _fit_axes(program: Any, k: int, probes: list, steps: list[int], seen: tuple,
              path: str) -> tuple[Rule, ...]:
    """Result k's axes that grow by a > 0 elements per unit of length (a * L + b)."""
    out = program.outputs[k]
    shapes = [_shape(program, out), *(_shape(p, p.outputs[k]) for p in probes)]
    if len({len(s) for s in shapes}) > 1:
        raise _not_affine(program.name, path, list(zip(seen, shapes)))
    found = []
    for axis, (x, y, z) in enumerate(zip(*shapes)):
        if x == y == z:
            continue
        a, rest = divmod(y - x, steps[0])
        if a <= 0 or rest or z - x != a * steps[1]:
            raise _not_affine(program.name, path, list(zip(seen, shapes)))
        if out.kind != OutputKind.INPUT and out.view.strides[axis] < 0:
            raise TraceError(f"{path} of {program.name} runs backwards along its dynamic "
                             f"axis {axis} (a negative stride, e.g. out[::-1]): cut back to "
                             "a call's length it would hold padding rows",
                             where=user_location(), fix="reverse it after the call "
                             "(f(x)[::-1]), or write the rows reversed with a kernel that "
                             "reads tg.length()")
        found.append((axis, a, x - a * seen[0]))
    return tuple(found)


def _fit_value(name: str, path: str, value: Any, others: list, steps: list[int],
               seen: tuple) -> Line | None:
    """None for a Python result that is the same at every length; (a, b) for an int that
    is a * L + b; else a TraceError."""
    if all(_same(value, w) for w in others):
        return None
    if _is_int(value) and all(_is_int(w) for w in others):
        a, rest = divmod(others[0] - value, steps[0])
        if not rest and others[1] - value == a * steps[1]:
            return (a, value - a * seen[0])
    raise _changing_value(name, path, list(zip(seen, [value, *others])))


def _check_served(program: Any, rules: ResultRules, traced_at: Callable[[int], Any],
                  paths: list[str]) -> None:
    """The rules hold at the smallest lengths the bucket serves (two that trace, of the
    first LOW_TRIES) and on both sides of where an axis's a * L + b reaches 0."""
    tried: set[int] = set()
    lo = rules.lo
    for m in range(lo, min(lo + LOW_TRIES, rules.bucket)):
        tried.add(m)
        _check_at(program, rules, m, traced_at, paths)
        if len(tried) - len(rules.failed) == LOW_PROBES:
            break
    kinks = {m for leaf in rules for _, a, b in leaf for m in (-b // a, -b // a + 1)}
    for m in sorted(kinks - tried):
        if lo <= m < rules.bucket:
            _check_at(program, rules, m, traced_at, paths)


def _check_at(program: Any, rules: ResultRules, m: int, traced_at: Callable[[int], Any],
              paths: list[str]) -> None:
    """Each result of the function traced at length m is what the rules give for m."""
    try:
        probe = traced_at(m)
    except Exception as exc:  # a call of this length raises it (refuse_failed)
        rules.failed[m] = f"{type(exc).__name__}: {exc}"
        return
    check_structure(program, [probe])
    check_launches(program, probe)
    for k in range(len(program.outputs)):
        _check_leaf(program, probe, k, m, rules, paths[k])


def _check_leaf(program: Any, probe: Any, k: int, m: int, rules: ResultRules,
                path: str) -> None:
    out, o = program.outputs[k], _output(probe, k)
    if o is None or _static(o) != _static(out):
        said = "no such result" if o is None else _describe(probe, o)
        raise _not_served(path, m, said, _describe(program, out), rules)
    if _static(out):
        line = rules.values[k]
        if not (_same(out.value, o.value) if line is None else
                _is_int(o.value) and o.value == line[0] * m + line[1]):
            raise _changing_value(program.name, path, [(rules.bucket, out.value),
                                                       (m, o.value)])
        return
    shape = list(_shape(program, out))
    for axis, a, b in rules[k]:
        shape[axis] = max(0, a * m + b)
    if _shape(probe, o) != tuple(shape):
        raise _not_served(path, m, _describe(probe, o), _describe(program, out), rules,
                          tuple(shape))
    if not rules[k]:
        _check_place(program, probe, k, path, (rules.bucket, m))


def _check_place(program: Any, probe: Any, k: int, path: str, seen: tuple) -> None:
    """A result of fixed shape starts at the same place of its array at every length: one
    that moves with the length indexes from the end (out[-3:], out[-1]), which in a padded
    call addresses padding rows."""
    out, o = program.outputs[k], probe.outputs[k]
    if out.kind == OutputKind.INPUT or math.prod(_shape(program, out)) == 0:
        return
    if _place(program, out) != _place(probe, o):
        raise TraceError(f"{path} of {program.name} has the fixed shape "
                         f"{_shape(program, out)}, but its place in the array it views moves "
                         f"with the dynamic length (lengths {seen[0]} and {seen[-1]}): it "
                         "indexes from the end (out[-3:], out[-1]), which in a call padded "
                         "to the bucket are padding rows", where=user_location(),
                         fix="index from the start, take it after the call (f(x)[-3:]), or "
                             "copy the rows with a kernel that reads tg.length()")


def _place(program: Any, out: Any) -> int:
    """Where a result's element 0 lies: bytes into the argument it views, or into the
    buffer it was copied out of."""
    if out.kind == OutputKind.INPUT_VIEW:
        return int(out.value)
    for op in program.ops:
        data = op.data
        if isinstance(data, Copy) and data.role == CopyRole.OUTPUT and \
                data.dst.buffer == out.view.buffer:
            return int(data.src.offset + out.view.offset)
    return int(out.view.offset)


def refuse_failed(rules: Any, n: int) -> None:
    """A call of a length the function does not trace at: the error eager gives too."""
    failed = getattr(rules, "failed", {})
    if n in failed:
        raise TraceError(f"{rules.name} does not trace at dynamic length {n} ({failed[n]}), "
                         f"so the graph of its bucket {rules.bucket} cannot stand in for it "
                         "(eagerly the function fails at that length too)",
                         where=user_location(), fix="call it with a length it works at, or "
                                                    "make it work at this one")


def cut(program: Any, rules: Any, n: int, result: Any, argument: Callable[[int], Any]) -> Any:
    """A padded run's results at the call's length n: arrays sliced along their dynamic
    axes, Python ints that follow the length recomputed, an argument handed back as
    `argument(index)` (the caller's own object)."""
    values = getattr(rules, "values", ())
    leaves, structure = pytree.flatten_leaves(result)  # (every call: no paths)
    out = []
    for k, (leaf, o, axes) in enumerate(zip(leaves, program.outputs, rules)):
        if o.kind == OutputKind.INPUT:  # the caller's own object, not the padded copy
            out.append(argument(o.input_index))
        elif o.kind == OutputKind.STATIC:
            line = values[k] if k < len(values) else None
            out.append(leaf if line is None else type(leaf)(line[0] * n + line[1]))
        else:
            out.append(sliced(leaf, axes, n) if hasattr(leaf, "shape") else leaf)
    return pytree.unflatten(structure, out)


def sliced(result: Any, axes: tuple[Rule, ...], n: int) -> Any:
    """A result cut back from the bucket's length to the call's along its dynamic axes:
    (axis, a, b) is an axis of max(0, a * n + b) elements (a slice clips at 0)."""
    if not axes:
        return result
    index = [slice(None)] * (max(a for a, _, _ in axes) + 1)
    whole = True
    for axis, a, b in axes:
        length = max(0, a * n + b)
        index[axis] = slice(0, length)
        whole = whole and length >= result.shape[axis]
    return result if whole else result[tuple(index)]  # (a device array's slice costs)


def check_combines(program: Any, longer: Any) -> None:
    """No tg.ops call may combine elements along an axis that follows the dynamic length:
    the padding would count (a max of zeros, a mean over the bucket). Each call site (op
    and line) must combine the same lengths at both lengths of the trace; one that runs
    at one length only depends on it too."""
    def sites(p: Any) -> dict[tuple[str, str], set[int]]:
        found: dict[tuple[str, str], set[int]] = {}
        for op, where, n in p.combines:
            found.setdefault((op, where), set()).add(n)
        return found
    mine, theirs = sites(program), sites(longer)
    for (op, where) in sorted(set(mine) | set(theirs)):
        n, m = mine.get((op, where)), theirs.get((op, where))
        if n != m:
            said = (f"{max(n)} elements" if n else "elements only at other lengths")
            raise TraceError(f"tg.ops.{op} combines {said} along an axis that follows the "
                             "dynamic length (it has the bucket's length, not the call's): "
                             "the padding would count in the result",
                             where=where,
                             fix="combine along other axes only, or write a kernel that "
                                 "reads tg.length() and skips the padding "
                                 "(docs/dynamic-shapes.md)")


def _seen(seen: list[tuple[int, Any]]) -> str:
    return ", ".join(f"{v!r} at length {n}" for n, v in seen)


def _not_affine(name: str, path: str, seen: list[tuple[int, Any]]) -> TraceError:
    return TraceError(f"{path} of {name} has the shapes {_seen(seen)}: not a * L + b "
                      "along each axis, so it cannot be cut back to a call's length",
                      where=user_location(),
                      fix="return arrays whose dynamic axes have a * length + b elements "
                          "(a > 0), or pad them to that")


def _not_served(path: str, m: int, got: str, there: str, rules: ResultRules,
                want: tuple[int, ...] | None = None) -> TraceError:
    cut = f"; cut back by the rule fitted there it would be {want}" if want else ""
    return TraceError(f"{path} of {rules.name} has {got} at dynamic length {m} but {there} "
                      f"at its bucket's length {rules.bucket}{cut}. The bucket's graph "
                      f"serves every length from {rules.lo} to {rules.bucket}, so a result's "
                      "dynamic axes must have max(0, a * L + b) elements at all of them; a "
                      "slice of fixed size (out[:4], out[-4:], out[:min(n, 4)]) has fewer "
                      "below its size", where=user_location(),
                      fix="return the whole array (or one whose length follows the dynamic "
                          "length: out, out[2:], out[:-1]) and slice it after the call "
                          "(f(x)[:4])")


def _describe(program: Any, out: Any) -> str:
    return "a Python value" if _static(out) else f"the shape {_shape(program, out)}"


def _changing_value(name: str, path: str, seen: list[tuple[int, Any]]) -> TraceError:
    return TraceError(f"{path} of {name} is the Python value {_seen(seen)}: it depends on "
                      "the dynamic length, and not as an int a * L + b (which would be "
                      "recomputed per call), so the bucket's graph cannot give each call "
                      "its own", where=user_location(),
                      fix="compute it after the call (e.g. from a result's shape), or "
                          "return it as a device array that a kernel fills from tg.length()")


def _paths(program: Any) -> list[str]:
    """The result leaves' paths (result[0], result['k'], ...), for messages."""
    count = len(program.outputs)
    try:
        _, paths, _ = pytree.flatten(pytree.unflatten(program.output_tree, list(range(count))),
                                     "result")
    except Exception:  # only for messages
        paths = []
    return paths if len(paths) == count else [f"result {k}" for k in range(count)]


def _output(program: Any, k: int) -> Any:
    return program.outputs[k] if k < len(program.outputs) else None


def _static(out: Any) -> bool:
    return bool(out.kind == OutputKind.STATIC)


def _shape(program: Any, out: Any) -> tuple[int, ...]:
    if out.kind == OutputKind.INPUT:
        return tuple(program.inputs[out.input_index].shape)
    if out.kind == OutputKind.STATIC:
        return ()
    return tuple(out.view.shape)


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _same(u: Any, v: Any) -> bool:
    """Are two Python results of traces at different lengths the same value? Objects
    compared by identity only (no __eq__) are compared by their attributes."""
    if u is v:
        return True
    if type(u) is not type(v):
        return False
    if type(u).__eq__ is object.__eq__:
        return not hasattr(u, "__dict__") or _same(vars(u), vars(v))
    try:
        return bool(u == v) or (u != u and v != v)  # NaN is itself
    except Exception:  # ambiguous: not known to be equal
        return False


def check_launches(program: Any, longer: Any) -> None:
    """A Python value passed to a kernel must not follow the dynamic length: inside the
    function `x.shape[0]` is the bucket's length, so `k(x, 1.0 / x.shape[0])` would pass
    the bucket's value on every call. Launches are matched in order, kernel by kernel."""
    for mine, theirs in zip(_launches(program), _launches(longer)):
        if mine.data.kernel is not theirs.data.kernel:
            return  # the launches themselves follow the length: nothing to pair
        for i, (a, b) in enumerate(zip(mine.data.args, theirs.data.args)):
            if _python_value(a) != _python_value(b):
                raise TraceError(f"argument {i} of {mine.name} is a Python value that "
                                 f"follows the dynamic length ({a!r} at the bucket's length, "
                                 f"{b!r} at another): x.shape inside a dynamic function is "
                                 "the bucket's, so the graph would pass the bucket's value "
                                 "on every call", where=mine.location,
                                 fix="pass tg.length() (the call's true length, patched on "
                                     "every call) and compute from it in the kernel")


def check_structure(program: Any, probes: list) -> None:
    """The result's structure (tuple lengths, dict keys) must not follow the length."""
    for p in probes:
        if p.output_tree != program.output_tree:
            raise TraceError(f"the structure of {program.name}'s result changes with the "
                             f"dynamic length ({program.output_tree} at the bucket's length, "
                             f"{p.output_tree} at another)",
                             fix="return the same structure for every length")


def _launches(program: Any) -> list:
    return [op for op in program.ops if op.kind == "kernel"]


def _python_value(a: Any) -> Any:
    """What of a launch argument is a Python value (arrays and dynamic scalars are not)."""
    if isinstance(a, tuple):
        return tuple(_python_value(x) for x in a)
    if isinstance(a, (View, ScalarArg)):
        return None
    return (type(a), repr(a))
