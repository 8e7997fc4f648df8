"""What a value of the wrong kind is and which of the traced function's arguments it came
from, for the errors that refuse it ("None (f's argument bias)"): looked up only when
such an error is raised."""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from .. import _numba

_DEPTH = 4  # containers looked into below an argument


def what_it_is(obj: Any, *, inline: bool = False) -> str:
    """The value, as an error names it: its kind, a short repr, and the argument of the
    traced function that holds it where one does ("None (f's argument bias)"; `inline`:
    "None from f's argument bias", for a message already in parentheses)."""
    if obj is None:
        said = "None"
    elif isinstance(obj, (list, tuple, dict, set, frozenset)):
        said = f"{_a(type(obj).__name__)} of {len(obj)}"
    elif isinstance(obj, (str, bytes, int, float, complex)):
        said = f"{_a(type(obj).__name__)} ({obj!r:.40})"
    else:
        said = _a(type(obj).__name__)
    where = origin(obj)
    if not where:
        return said
    return f"{said} from {where}" if inline else f"{said} ({where})"


def kernel_argument(kernel: Any, i: int, value: Any) -> str:
    """Which parameter of the kernel got `value`, and where the value came from: "its
    parameter out, given None (f's argument bias)"."""
    try:
        names = list(inspect.signature(_numba.kernel_py_func(kernel)).parameters)
    except Exception:  # not a kernel with a Python signature
        names = []
    param = f"its parameter {names[i]}, given " if i < len(names) else "given "
    return param + what_it_is(value, inline=True)


def _a(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def origin(obj: Any) -> str | None:
    """"f's argument x.w" where the traced function's argument x.w holds this very object
    (several: all of them), None where none does or no trace is active."""
    tracer = _numba.current_tracer()
    call = getattr(tracer, "call", None)
    if call is None:
        return None
    fn, args, kwargs = call
    found: list[str] = []
    for root, value in [*zip(_positional_names(fn, len(args)), args), *kwargs.items()]:
        _find(value, obj, str(root), _DEPTH, found)
    if not found:
        return None
    name = str(getattr(fn, "__qualname__", getattr(fn, "__name__", "the function")))
    name = name.rsplit("<locals>.", 1)[-1]
    if len(found) == 1:
        return f"{name}'s argument {found[0]}"
    return f"{name}'s arguments {', '.join(found[:4])} hold it"


def _find(value: Any, obj: Any, path: str, depth: int, found: list[str]) -> None:
    if value is obj:
        found.append(path)
        return
    if depth == 0:
        return
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        items: Any = ((f".{k}", v) for k, v in zip(value._fields, value))
    elif isinstance(value, (list, tuple)):
        items = ((f"[{i}]", v) for i, v in enumerate(value))
    elif isinstance(value, dict):
        items = ((f"[{k!r}]", v) for k, v in value.items())
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = ((f".{f.name}", getattr(value, f.name, None))
                 for f in dataclasses.fields(value))
    else:
        return
    for step, child in items:
        _find(child, obj, path + step, depth - 1, found)


def _positional_names(fn: Any, n: int) -> list[str]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return [f"args[{k}]" for k in range(n)]
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), "args")
    return names[:n] + [f"{var}[{k}]" for k in range(n - len(names))]
