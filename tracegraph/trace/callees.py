"""The Python functions a traced function runs, however it reaches them (`self.scale()`,
`layers.forward(x)`, a helper that returns the kernel to launch): eagerly each call runs
them again and they read their own names again, so trace/guards.py follows the names they
read as it does the traced function's own, and exempts what they change on the objects
they run on. Recorded through sys.monitoring on Python 3.12+ (library code's events off
after its first call), else with a trace function on the tracing thread (chained to a
debugger's or coverage's, paused inside tracegraph's own work: `untraced`)."""
from __future__ import annotations

import functools
import os
import sys
import sysconfig
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._numba import compiling
from ..location import warn

# code of these packages and of the standard library (by where its file is: a module of
# the user's may share a standard module's name, `sched.py`) is not the user's: its state
# is the library's, and following it would only cost time
_LIBRARIES = frozenset({"tracegraph", "numba", "llvmlite", "numpy", "cupy", "cupyx",
                        "torch", "networkx", "optree", "cuda", "nvmath", "pydot", "_pytest",
                        "pytest", "pluggy", "hypothesis", "coverage", "IPython",
                        "ipykernel"})
_STDLIB = tuple(os.path.normcase(os.path.realpath(sysconfig.get_paths()[k])) + os.sep
                for k in ("stdlib", "platstdlib"))
_SITE = ("site-packages", "dist-packages")


def library_code(code: types.CodeType, scope: dict) -> bool:
    if str(scope.get("__name__", "")).partition(".")[0] in _LIBRARIES:
        return True
    return _standard(code.co_filename)


@functools.lru_cache(maxsize=4096)
def _standard(file: str) -> bool:
    """Is this file the standard library's or an installed package's (site-packages: import
    hooks and other packages' helpers run inside a trace are not the user's; a package of
    the user's installed editable lives in its source tree)?"""
    if file.startswith("<frozen"):
        return True
    file = os.path.normcase(os.path.realpath(file)) if os.path.isabs(file) else file
    return file.startswith(_STDLIB) or any(os.sep + s + os.sep in file for s in _SITE)


@dataclass(frozen=True, eq=False)
class Scope:
    """The globals of another module a called function runs in (`layers` for
    `layers.forward`), by identity; `names`: the names its code uses."""
    globals: dict
    names: frozenset[str] = field(default=frozenset())

    @property
    def name(self) -> str:
        return str(self.globals.get("__name__", "?"))


class Callees:
    """While entered: record each Python function of the user's the thread runs (its code
    and globals, and the objects it ran on: its first arguments), not the code of libraries
    or of the standard library. Through sys.monitoring where there is one (Python 3.12+;
    library code's event is turned off after its first call), else a trace function."""

    def __init__(self) -> None:
        self.found: dict[types.CodeType, dict] = {}
        self.selves: dict[types.CodeType, dict[int, Any]] = {}  # code -> first arguments
        self._library: dict[types.CodeType, bool] = {}
        self._previous: Any = None
        self._monitored = False
        self.interrupted = False  # something replaced the trace function halfway

    def __enter__(self) -> Callees:
        self._monitored = _MONITOR.start(self)
        if not self._monitored:
            self._previous = sys.gettrace()
            sys.settrace(self._event)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._monitored:
            _MONITOR.stop()
        elif sys.gettrace() == self._event:
            sys.settrace(self._previous)
        else:  # a debugger set its own (pdb at a breakpoint), or turned tracing off: keep
            # that, and say the functions called after it went unrecorded
            self.interrupted = True

    def _event(self, frame: types.FrameType, event: str, arg: Any) -> Any:
        self.saw(frame)
        # a debugger's or coverage's trace function goes on seeing what it saw
        return self._previous(frame, event, arg) if self._previous is not None else None

    def saw(self, frame: types.FrameType) -> bool:
        """Record a function starting (or resuming) in `frame`; is it library code?"""
        code = frame.f_code
        library = self._library.get(code)
        if library is None:
            library = library_code(code, frame.f_globals)
            if not library and compiling():  # Python Numba runs as it compiles (another
                return False  # package's typing hooks): not the function's; asked again
            self._library[code] = library
            if not library:
                self.found[code] = frame.f_globals
        if not library and code.co_argcount:
            selves = self.selves.setdefault(code, {})
            if len(selves) < _SELVES:
                first = frame.f_locals.get(code.co_varnames[0], selves)
                if first is not selves:
                    selves[id(first)] = first
        return library

    def say_interrupted(self, name: str, where: str) -> None:
        """Warn where something replaced the trace function halfway through the trace."""
        if self.interrupted:
            warn(f"tracegraph: a debugger replaced tracegraph's trace function while "
                 f"{name} was traced, so the functions it called after that are not "
                 "known: state they read is not checked by later calls. Call "
                 "f.clear() and trace it again without stopping in it (traced at "
                 f"{where})")

    def user_code(self) -> list[tuple[types.CodeType, dict, tuple]]:
        """The user's functions that ran, with their globals and the objects they ran on."""
        return [(code, scope, tuple(self.selves.get(code, {}).values()))
                for code, scope in self.found.items()]


_SELVES = 16  # objects recorded per function (the instances a method ran on)


class _Monitor:
    """One sys.monitoring tool for the threads that trace: a function's start or resumption
    is recorded for the thread tracing it. Library code's events are turned off for good
    (they are never needed); the user's stay on, so every trace sees every call."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active: dict[int, Callees] = {}
        self.tool: int | None = None

    def start(self, callees: Callees) -> bool:
        monitoring = getattr(sys, "monitoring", None)
        if monitoring is None:
            return False
        with self.lock:
            if threading.get_ident() in self.active:  # a trace inside a trace: its own way
                return False
            if self.tool is None:
                self.tool = next((t for t in (4, 3) if monitoring.get_tool(t) is None), None)
                if self.tool is None:  # both taken (by other tools): a trace function
                    return False
                monitoring.use_tool_id(self.tool, "tracegraph")
                for event in (monitoring.events.PY_START, monitoring.events.PY_RESUME):
                    monitoring.register_callback(self.tool, event, self._started)
                monitoring.set_events(self.tool, monitoring.events.PY_START |
                                      monitoring.events.PY_RESUME)
            self.active[threading.get_ident()] = callees
        return True

    def stop(self) -> None:
        monitoring = sys.monitoring  # type: ignore[attr-defined]
        with self.lock:
            self.active.pop(threading.get_ident(), None)
            if not self.active and self.tool is not None:
                monitoring.set_events(self.tool, 0)
                for event in (monitoring.events.PY_START, monitoring.events.PY_RESUME):
                    monitoring.register_callback(self.tool, event, None)
                monitoring.free_tool_id(self.tool)
                self.tool = None

    def _started(self, code: types.CodeType, offset: int) -> Any:  # noqa: ARG002
        callees = self.active.get(threading.get_ident())
        frame: types.FrameType | None = sys._getframe(1)
        while frame is not None and frame.f_code is not code:
            frame = frame.f_back
        if frame is None:
            return None
        if callees is None:  # another thread: library code is off for good, the user's not
            library = library_code(code, frame.f_globals)
        else:
            library = callees.saw(frame)
        return sys.monitoring.DISABLE if library else None  # type: ignore[attr-defined]


_MONITOR = _Monitor()


def untraced(method: Callable) -> Callable:
    """Run a tracer entry point (a launch, a copy) without the trace function: what
    tracegraph and Numba run there is theirs, and each call of it would cost an event."""
    @functools.wraps(method)
    def run(*args: Any, **kwargs: Any) -> Any:
        saved = sys.gettrace()
        if saved is None:
            return method(*args, **kwargs)
        sys.settrace(None)
        try:
            return method(*args, **kwargs)
        finally:
            sys.settrace(saved)
    return run
