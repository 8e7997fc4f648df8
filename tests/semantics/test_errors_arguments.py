"""A value of the wrong kind where an array is expected (None, a list, a string, a dict,
another object) is a tracegraph error at the user's line that names the argument it came
from (the traced function's parameter, or the path inside it) and what was expected:
never an AttributeError from tracegraph's internals. Kernel launches, tg.empty_like and
zeros_like, cuda.device_array_like, tg.ops, tg.record/wait/callback, tg.while_/if_, dtypes
and dynamic= arguments."""
from __future__ import annotations

import inspect
import re

import numpy as np
import pytest
from numba import cuda

import tracegraph as tg
from small_kernels import add, scale

N = 16
WRONG = {"None": None, "list": [1.0] * N, "str": "abc", "dict": {"a": 1.0},
         "object": object()}
SAID = {"None": "None", "list": "a list of 16", "str": "a str ('abc')", "dict": "a dict of 1",
        "object": "an object"}


def _dev():
    return cuda.to_device(np.ones(N, np.float32))


def _line(fn, marker: str) -> str:
    lines, start = inspect.getsourcelines(fn)
    return f"{__file__}:{start + next(k for k, t in enumerate(lines) if marker in t)}"


def _kernel_gets(x, out):
    scale[1, N](x, 2.0, out)  # the launch
    return out


@pytest.mark.parametrize("kind", sorted(WRONG))
def test_a_kernel_argument_of_the_wrong_kind_names_parameter_and_argument(backend, kind):
    f = tg.compile(_kernel_gets, backend=backend)
    with pytest.raises(tg.TraceError) as err:
        f(WRONG[kind], _dev())
    what = err.value.what
    assert f"argument 0 of scale has type {type(WRONG[kind]).__name__}" in what
    assert f"its parameter x, given {SAID[kind]}" in what
    if kind not in ("list", "dict"):  # (containers are rebuilt from their leaves)
        assert "_kernel_gets's argument x" in what
    assert err.value.where == _line(_kernel_gets, "# the launch")
    assert "device array" in err.value.fix


def test_a_wrong_value_inside_a_container_is_named_by_its_path(backend):
    def step(cfg, out):
        add[1, N](cfg["x"], cfg["y"], out)
        return out

    f = tg.compile(step, backend=backend)
    with pytest.raises(tg.TraceError, match=r"its parameter y, given a str \('abc'\) from "
                                            r"step's argument cfg\['y'\]"):
        f({"x": _dev(), "y": "abc"}, _dev())


def _like(x):
    out = tg.empty_like(x)  # the like
    scale[1, N](x, 2.0, out)
    return out


@pytest.mark.parametrize("kind", sorted(WRONG))
def test_empty_like_of_the_wrong_kind_names_the_argument(backend, kind):
    f = tg.compile(_like, backend=backend)
    with pytest.raises(tg.TraceError) as err:
        f(WRONG[kind])
    assert f"tg.empty_like(a) makes an array like the array `a`, and got {SAID[kind]}" in \
        err.value.what
    assert err.value.where == _line(_like, "# the like")
    assert "tg.empty(shape, dtype)" in err.value.fix


@pytest.mark.parametrize("make", ["zeros_like", "device_array_like"])
def test_the_other_likes_name_the_argument(backend, make):
    def step(x, y):
        out = tg.zeros_like(y) if make == "zeros_like" else cuda.device_array_like(y)
        scale[1, N](x, 2.0, out)
        return out

    f = tg.compile(step, backend=backend)
    with pytest.raises(tg.TraceError, match=r"got None \(step's argument y\)"):
        f(_dev(), None)


@pytest.mark.parametrize("use", ["record", "wait", "callback", "ops", "while", "if"])
def test_tracegraph_functions_taking_arrays_refuse_other_values(backend, use):
    def step(x, flag):
        scale[1, N](x, 2.0, x)
        if use == "record":
            tg.record(cuda.event(), flag)
        elif use == "wait":
            tg.wait(cuda.event(), flag)
        elif use == "callback":
            tg.callback(lambda: None, flag)
        elif use == "ops":
            tg.ops.add(x, flag)
        elif use == "while":
            with tg.while_(flag, max_iterations=2):
                scale[1, N](x, 2.0, x)
        else:
            with tg.if_(flag):
                scale[1, N](x, 2.0, x)
        return x

    f = tg.compile(step, backend=backend)
    with pytest.raises(tg.TraceError, match=r"a list of 2 \(step's argument flag\)") as err:
        f(_dev(), [1, 2])
    assert err.value.where.startswith(__file__)


@pytest.mark.parametrize("dtype", ["abc", [1.0, 2.0]])
def test_a_value_that_is_no_dtype_is_a_trace_error(backend, dtype):
    def step(x):
        out = tg.empty(N, dtype)
        scale[1, N](x, 2.0, out)
        return out

    with pytest.raises(tg.TraceError, match="is not a NumPy dtype"):
        tg.compile(step, backend=backend)(_dev())


@pytest.mark.parametrize("kind, said", [("None", "no array there (None, an empty "
                                                  "container, or no argument of that name)"),
                                        ("str", "no array there, only other values")])
def test_a_dynamic_argument_that_is_no_array_is_a_signature_error(backend, kind, said):
    f = tg.compile(_like, backend=backend, dynamic={"x": 0}, buckets=(16, 32))
    with pytest.raises(tg.SignatureError, match=re.escape(said)) as err:
        f(WRONG[kind])
    assert err.value.where.startswith(__file__)


def test_an_argument_that_is_a_traced_array_of_another_trace_is_still_refused(backend):
    kept = []

    def keep(x):
        kept.append(tg.empty_like(x))
        scale[1, N](x, 2.0, kept[-1])
        return kept[-1]

    with pytest.warns(UserWarning, match=r"calls kept\.append\(\)"):
        tg.compile(keep, backend=backend).trace(_dev())
    f = tg.compile(_kernel_gets, backend=backend)
    with pytest.raises(tg.TraceError, match="traced array from another trace"):
        f(kept[0], _dev())
