"""The signature stage: what the caller passed (arguments.py), one call's key and the memo
of the last call (call.py), and why a call matches no compiled graph (mismatch.py)."""
from __future__ import annotations

from .arguments import (
    DEVICE,
    HOST,
    ArrayInfo,
    alias_groups,
    describe,
    disjoint,
    has_fixed_metadata,
)
from .call import (
    Call,
    CallAnalyzer,
    array_key,
    device_of,
    hashable,
    same_value,
    static_key,
    weak,
)
from .mismatch import describe_mismatch, device_diffs, distance, order_diffs

__all__ = [
    "DEVICE",
    "HOST",
    "ArrayInfo",
    "Call",
    "CallAnalyzer",
    "alias_groups",
    "array_key",
    "describe",
    "describe_mismatch",
    "device_diffs",
    "device_of",
    "disjoint",
    "distance",
    "has_fixed_metadata",
    "hashable",
    "order_diffs",
    "same_value",
    "static_key",
    "weak",
]
