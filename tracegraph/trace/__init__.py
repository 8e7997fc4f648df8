"""The trace stage: run the user's function once with traced arrays and record, in order,
every launch it makes (nothing executes, no GPU is needed). functions.py: what a traced
function calls (tg.empty, tg.record, tg.access, ...); tracer.py: the recording; bind.py:
a whole function, from its arguments to its results."""
from __future__ import annotations

from ..location import user_location
from ..traced import Array
from .bind import aliased_inputs, overlap_said, trace_function
from .foreign import launch, library, node_attributes
from .functions import access, callback, empty, empty_like, length, record, wait, zeros, zeros_like
from .tracer import Tracer

__all__ = [
    "Array",
    "Tracer",
    "access",
    "aliased_inputs",
    "callback",
    "empty",
    "empty_like",
    "launch",
    "length",
    "library",
    "node_attributes",
    "overlap_said",
    "record",
    "trace_function",
    "user_location",
    "wait",
    "zeros",
    "zeros_like",
]
