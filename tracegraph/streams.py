"""How a call names the CUDA stream its graph runs on. `f(..., stream=s)` where the
function has no parameter named `stream` (tracegraph takes no name from the user's
parameters: where it has one, `stream=` is the function's own argument); `f.on(s)(...)`
and `f.on(s).replay(...)` for every function. Launches inside the traced function take
no stream: the graph orders them by the data they touch."""
from __future__ import annotations

import inspect
from typing import Any


def has_stream_parameter(fn: Any) -> bool:
    """Does the function name a parameter `stream` (which `stream=` then binds)?"""
    try:
        return "stream" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # no signature to read: stream= stays tracegraph's
        return False


def entries(f: Any) -> tuple[Any, Any]:
    """(call, replay) of the compiled function `f`: the C helper's entries, which take a
    lone stream= as the graph's (backends.fast_entry); Python ones where stream= is the
    function's own argument."""
    if f._own_stream:
        return (lambda *args, **kwargs: f._call(args, None, kwargs, compile_missing=True),
                lambda *args, **kwargs: f._call(args, None, kwargs, compile_missing=False))
    from . import backends
    return backends.fast_entry(f, f._slow_call), backends.fast_entry(f, f.replay)


class OnStream:
    """A compiled function (with the arguments a method binds first) that runs on one
    CUDA stream: `f.on(s)(x)` calls, compiling a new signature if need be; `f.on(s)
    .replay(x)` replays a compiled one and never traces. `s` is any stream Numba or
    cuda.core knows (None: the default stream)."""

    def __init__(self, fn: Any, stream: Any, bound: tuple = ()):
        self._fn, self._stream, self._bound = fn, stream, bound

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn._call((*self._bound, *args), self._stream, kwargs,
                              compile_missing=True)

    def replay(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn._call((*self._bound, *args), self._stream, kwargs,
                              compile_missing=False)

    def __repr__(self) -> str:
        return f"<{self._fn!r} on stream {self._stream!r}>"
