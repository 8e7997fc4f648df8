"""The C helper's checks of the names a graph's function reads (backends/cuda/
_graphlaunch.c), before it replays an armed call: a global, a closure cell, an attribute
path, a container's shape, a host array's layout, in C as in Python; a check that lets
the executable be re-armed is a miss. A graph exec of 0 checks without launching (no
driver here)."""
from __future__ import annotations

import weakref

import numpy as np
from armed_replay import Armed, Obj, dry_run, replay


@dry_run
def test_the_paths_the_function_reads_are_checked():
    a, kernel, other = Obj(), Obj(), Obj()
    scope = {"k": kernel}
    holder = Obj()
    holder.cfg = {"act": kernel}

    def closure():
        return kernel
    cell = closure.__closure__[0]
    checks = ((0, scope, "k", (), kernel), (1, cell, None, (), kernel),
              (2, holder, None, ((False, "cfg"), (True, "act")), kernel),
              (3, None, 0, ((False, "tag"),), "x"))
    a.tag = "x"
    ex = Armed((weakref.ref(a),), (0, 0, 0, None, checks))
    assert replay(ex, (a,)) is a
    for undo, redo in ((lambda: scope.__setitem__("k", other), lambda: scope.__setitem__("k", kernel)),
                       (lambda: scope.pop("k"), lambda: scope.__setitem__("k", kernel)),
                       (lambda: holder.cfg.__setitem__("act", other),
                        lambda: holder.cfg.__setitem__("act", kernel)),
                       (lambda: delattr(holder, "cfg"), lambda: setattr(holder, "cfg", {"act": kernel})),
                       (lambda: setattr(a, "tag", "y"), lambda: setattr(a, "tag", "x"))):
        undo()
        assert replay(ex, (a,)) is NotImplemented
        redo()
        assert replay(ex, (a,)) is a
    kernel = other  # the closure's cell now holds another
    assert replay(ex, (a,)) is NotImplemented


@dry_run
def test_a_containers_shape_is_checked():
    a, items, opts = Obj(), [1, 2], {"lr": 1, "wd": 2}
    ex = Armed((weakref.ref(a),), (0, 0, 0, None, ((10, {"L": items}, "L", (), 2),
                                                     (12, opts, None, (), ("lr", "wd")))))
    assert replay(ex, (a,)) is a
    items.append(3)
    assert replay(ex, (a,)) is NotImplemented
    items.pop()
    del opts["wd"]
    assert replay(ex, (a,)) is NotImplemented
    opts["wd"] = 5  # the same keys again, in the same order
    assert replay(ex, (a,)) is a


@dry_run
def test_an_arrays_layout_is_checked_in_c_and_in_python():
    # a host array read only for its layout: the very array, of the same shape, strides
    # and dtype (a NumPy array can be reshaped in place)
    from tracegraph.backends import checks_hold
    from tracegraph.pytree import layout
    a, h = Obj(), np.zeros(4)
    scope = {"H": h}
    checks = ((30, scope, "H", (), layout(h)),)
    ex = Armed((weakref.ref(a),), (0, 0, 0, None, checks))
    assert replay(ex, (a,)) is a and checks_hold(checks, (a,))
    h[:] = 7.0  # refilled in place: the same layout
    assert replay(ex, (a,)) is a and checks_hold(checks, (a,))
    h.shape = (2, 2)
    assert replay(ex, (a,)) is NotImplemented and not checks_hold(checks, (a,))
    h.shape = (4,)
    assert replay(ex, (a,)) is a
    scope["H"] = np.zeros(4)  # another array of the same layout
    assert replay(ex, (a,)) is NotImplemented and not checks_hold(checks, (a,))
    scope["H"] = h.view(np.int64)
    assert replay(ex, (a,)) is NotImplemented


def test_checks_hold_in_python_as_in_c():
    from tracegraph.backends import checks_hold
    k, other, holder = Obj(), Obj(), Obj()
    scope = {"k": k}
    holder.cfg = {"act": k}
    path = (2, holder, None, ((False, "cfg"), (True, "act")), k)
    assert checks_hold(((0, scope, "k", (), k), path), ())
    scope["k"] = other
    assert not checks_hold(((0, scope, "k", (), k),), ())
    assert not checks_hold(((0, {}, "k", (), k),), ())
    holder.cfg = {}
    assert not checks_hold((path,), ())
    assert checks_hold(((3, None, 0, (), k),), (k,))
    assert not checks_hold(((3, None, 1, (), k),), (k,))


@dry_run
def test_a_check_that_lets_the_executable_be_rearmed_is_a_miss():
    """A check may run Python (a property), during which another thread may re-point or
    close the executable: what was armed before is not launched then."""
    a, kernel = Obj(), Obj()

    class Cfg:
        @property
        def act(self):
            ex.armed = (weakref.ref(Obj()),)  # what another thread's call would do
            return kernel
    cfg = Cfg()
    ex = Armed((weakref.ref(a),), (0, 0, 0, None, ((2, cfg, None, ((False, "act"),), kernel),)))
    assert replay(ex, (a,)) is NotImplemented

    class Steady:
        act = kernel
    ex = Armed((weakref.ref(a),), (0, 0, 0, None, ((2, Steady(), None, ((False, "act"),),
                                                      kernel),)))
    assert replay(ex, (a,)) is a
