"""The C helper's replay of an armed call (backends/cuda/_graphlaunch.c): it launches only
when every argument is the very object the executable is armed with, and hands back what
the executable says. A graph exec of 0 checks without launching (no driver here)."""
from __future__ import annotations

import ctypes
import gc
import weakref

import numpy as np
import pytest

graphlaunch = pytest.importorskip("tracegraph.backends.cuda._graphlaunch")
replay = graphlaunch.replay


def _driver_loads() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


# a graph exec of 0 is only a dry run where no driver is loaded (a GPU machine launches it;
# the GPU suite covers the C replay through the cuda backend's direct-replay tests)
dry_run = pytest.mark.skipif(_driver_loads(), reason="a CUDA driver is loaded: 0 would launch")


class Armed:
    def __init__(self, armed, fast):
        self.armed, self.fast = armed, fast


class Obj:
    pass


@dry_run
def test_the_armed_objects_replay_and_return_what_the_executable_says():
    a, b = Obj(), Obj()
    refs = (weakref.ref(a), (2.0,), weakref.ref(b))
    assert replay(Armed(refs, (0, 0, -1)), (a, 2.0, b)) is None
    assert replay(Armed(refs, (0, 0, 2)), (a, 2.0, b)) is b
    assert replay(Armed(refs, (0, 0, 0)), (a, 2.0, b)) is a


@pytest.mark.parametrize("case", ["other object", "equal scalar", "fewer", "more",
                                  "not armed", "no fast", "result out of range"])
def test_anything_else_is_not_replayed(case):
    a, b = Obj(), Obj()
    x = 2.0
    refs = (weakref.ref(a), (x,))
    ex = Armed(refs, (0, 0, -1))
    args: tuple = (a, x)
    if case == "other object":
        args = (Obj(), x)
    elif case == "equal scalar":  # the same value in another object: not the armed call
        args = (a, float("2.0") + 0.0 * len(str(b)))
        assert args[1] == x
        if args[1] is x:
            pytest.skip("the interpreter shares the float")
    elif case == "fewer":
        args = (a,)
    elif case == "more":
        args = (a, x, b)
    elif case == "not armed":
        ex.armed = None
    elif case == "no fast":
        ex.fast = None
    else:
        ex.fast = (0, 0, 5)
    assert replay(ex, args) is NotImplemented


def test_a_collected_argument_is_not_replayed():
    a = Obj()
    ex = Armed((weakref.ref(a),), (0, 0, -1))
    del a
    gc.collect()
    assert replay(ex, (Obj(),)) is NotImplemented


@dry_run
def test_a_numpy_argument_by_identity():
    x = np.zeros(3)
    ex = Armed(((x,),), (0, 0, 0))
    assert replay(ex, (x,)) is x
    assert replay(ex, (x.copy(),)) is NotImplemented


def test_bad_calls_raise():
    with pytest.raises(TypeError):
        replay(Armed((), (0, 0, -1)), [])
    with pytest.raises(AttributeError):
        replay(object(), ())


def test_the_python_launcher_makes_its_handles_once_and_raises_on_an_error(monkeypatch):
    """Where the C helper is not built, replays launch through Executable.launcher."""
    from types import SimpleNamespace

    from tracegraph.backends.cuda import handles, rawnodes
    calls = []
    fake = SimpleNamespace(CUstream=lambda h: ("stream", h),
                           cuGraphLaunch=lambda g, s: (calls.append((g, s)) or (rc[0],)),
                           CUresult=SimpleNamespace(CUDA_SUCCESS=0))
    rc = [0]
    monkeypatch.setattr(rawnodes, "driver", lambda: fake)
    monkeypatch.setattr(handles, "driver", lambda: fake)
    ex = rawnodes.Executable.__new__(rawnodes.Executable)
    ex.handle, ex.is_closed = "exec", True
    go = ex.launcher(SimpleNamespace(handle=7))
    go()
    go()
    assert calls == [("exec", ("stream", 7))] * 2

    class Err(int):
        name = "CUDA_ERROR_LAUNCH_FAILED"
    rc[0] = Err(719)
    with pytest.raises(RuntimeError, match="CUDA_ERROR_LAUNCH_FAILED"):
        go()
