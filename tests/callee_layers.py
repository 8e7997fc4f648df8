"""A module of the user's own for tests/test_callees.py: functions the traced functions
call, which read this module's globals (a kernel, a device array, a list of kernels, a
value) and keep state of their own (a call counter, a log)."""
from __future__ import annotations

from small_kernels import iadd, increment, iscale

K = increment           # the kernel forward() launches
W = None                # a device array forward_w() passes
KERNELS = [increment]  # the kernels forward_all() launches, in order
GAIN = 2.0              # a value scaled() passes
CALLS = 0
LOG: list = []


def forward(x):
    K[1, 32](x)


def forward_w(x):
    iadd[1, 32](x, W)


def forward_all(x):
    for k in KERNELS:
        k[1, 32](x)


def scaled(x):
    iscale[1, 32](x, GAIN)


def counted(x):
    global CALLS
    CALLS += 1  # state it keeps: no reason to trace again
    LOG.append(CALLS)
    increment[1, 32](x)

