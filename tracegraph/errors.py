"""tracegraph's exceptions: each says what was wrong, where in the user's code, and what to do."""
from __future__ import annotations


class TracegraphError(Exception):
    """Base class of every error tracegraph raises on purpose."""

    def __init__(self, what: str, *, where: str | None = None, fix: str | None = None):
        self.what = what
        self.where = where
        self.fix = fix
        parts = [what]
        if where:
            parts.append(f"at {where}")
        if fix:
            parts.append(f"fix: {fix}")
        super().__init__("\n  ".join(parts))


class TraceError(TracegraphError):
    """The traced function did something that cannot be recorded into a graph."""


class SignatureError(TracegraphError):
    """replay() got arguments that match no compiled signature."""


class StaleGraphError(TracegraphError):
    """verify= traced a call again and the Program differs from the one its cached graph
    was built from: Python state outside the checked names changed."""


class LoweringError(TracegraphError):
    """A Program could not be lowered to explicit graph nodes."""


class VerifyError(TracegraphError):
    """A Program or Plan broke an invariant of the IR (a bug in a pass, or a hand-built IR)."""


class CudaError(TracegraphError):
    """A CUDA driver call failed. Carries the driver's error name and the graph node involved."""

    def __init__(self, what: str, *, error_name: str = "", call: str = "", node: str | None = None,
                 where: str | None = None, fix: str | None = None):
        self.error_name = error_name
        self.call = call
        self.node = node
        detail = what
        if call or error_name:
            detail = f"{what} ({call} returned {error_name})" if call else f"{what} ({error_name})"
        if node:
            detail += f" in node {node}"
        super().__init__(detail, where=where, fix=fix)


class OutOfMemoryError(CudaError):
    """An allocation a graph needs (at build or replay) found no memory: says the bytes
    asked (`nbytes`; None where the driver did not say), what holds memory, and the fix."""

    def __init__(self, what: str, *, nbytes: int | None, where: str | None = None,
                 fix: str | None = None):
        self.nbytes = nbytes
        super().__init__(what, error_name="CUDA_ERROR_OUT_OF_MEMORY", where=where, fix=fix)
