"""What Numba compiles into each kernel specialization a trace launches, as it was at that
specialization's first launch: eagerly Numba compiles a kernel then, with the constants,
host arrays and classes its code reads (_numba/compiled_in.py); tracegraph compiles after
the trace, so a value changed after that launch is refused when the function returns."""
from __future__ import annotations

from typing import Any

from .. import _numba
from ..errors import TraceError
from ..ir import Op, ScalarArg, View


def argument_types(traced: tuple, given: tuple) -> tuple:
    """What Numba specializes a kernel on: views by dtype, rank, layout and whether
    read-only; scalars by Numba's type (a dynamic one by its value's: `1.5` given either
    way is one float64); tuples item by item. (Finer keys would refuse a value overridden
    and restored between two launches of one specialization.)"""
    out: list[Any] = []
    for a, g in zip(traced, given):
        if isinstance(a, View):
            out.append((a.dtype, len(a.shape), _numba.layout_of(a.shape, a.strides, a.itemsize),
                        a.readonly))
        elif isinstance(a, tuple):
            out.append((type(a), argument_types(a, g if isinstance(g, tuple) else a)))
        else:
            value = g.value if isinstance(a, ScalarArg) and hasattr(g, "value") else a
            out.append(_numba.scalar_type(value) or type(value))
    return tuple(out)


class CompiledIn:
    """(kernel, argument types) -> (the kernel, its name, the first launch's line and op,
    what it compiles in as it was then)."""

    def __init__(self) -> None:
        self._first: dict[tuple, tuple[Any, str, str, Op, tuple]] = {}
        self._arrays: dict[int, Any] = {}  # host arrays' snapshots, shared while they hold

    def record(self, kernel: Any, name: str, where: str, traced_args: tuple, given: tuple,
               op: Op) -> None:
        specialization = (id(kernel), argument_types(traced_args, given))
        if specialization not in self._first:
            self._first[specialization] = (kernel, name, where, op,
                                           _numba.compiled_in_values(kernel, self._arrays))

    def check(self, where: str) -> None:
        """After the function returned: each value still compiles in as it did."""
        for _, kernel, launched, _, constants in self._first.values():
            for ref, value in constants:
                now = ref.resolve()
                if not _numba.same_constant(now, value):
                    raise TraceError(
                        f"kernel {kernel} reads {ref.describe()}, which held {value!r} "
                        f"at its first launch with these argument types ({launched}) and "
                        f"holds {_numba.shown_constant(now)} now: eager Numba compiles a "
                        "kernel at its first launch, with the values it reads then; "
                        "tracegraph compiles after the trace",
                        where=where,
                        fix="pass the value to the kernel as an argument, or set it before "
                            "the kernel's first launch and leave it")

    def host_arrays(self) -> list[tuple[Op, str, str, list[Any]]]:
        """(first launch op, kernel name, its line, the host arrays it compiles in)."""
        out = []
        for _, name, where, op, constants in self._first.values():
            arrays = [a for _, value in constants for a in _numba.host_arrays(value)]
            if arrays:
                out.append((op, name, where, arrays))
        return out
