"""Whether the order of keyword arguments can matter to a function (signature/keywords.py):
never for named keyword parameters; for **kwargs only where the function does more with
the dict than read it by name (kw["a"], kw.get("a"), kw.get("a", default), "a" in kw)."""
from __future__ import annotations

import pytest

from tracegraph.signature.keywords import keyword_order_matters


def _helper(**kw):
    return kw


def by_name(x, **kw):
    return kw["a"] + kw.get("b") + kw.get("c", 1.0) + ("d" in kw) + ("e" not in kw) + x


def by_name_with_star_args(x, *rest, **kw):
    return kw["a"], rest, x


def named_only(x, *, b, a):
    return a + b + x


def default_is_a_name(x, **kw):
    return kw.get("a", x)


def iterates(x, **kw):
    return [v for _, v in kw.items()] + [x]


def lists(x, **kw):
    return list(kw), x


def passes_on(x, **kw):
    return _helper(**kw), x


def keeps(x, **kw):
    _helper(store=kw)
    return x


def rebinds(x, **kw):
    kw = dict(kw)
    return kw["a"], x


def nested(x, **kw):
    return lambda: kw["a"] + x


def default_is_computed(x, **kw):
    return kw.get("a", x.size)


def stores(x, **kw):
    kw["a"] = x
    return kw["a"]


@pytest.mark.parametrize("fn", [by_name, by_name_with_star_args, named_only,
                                default_is_a_name])
def test_reading_by_name_makes_the_order_irrelevant(fn):
    assert not keyword_order_matters(fn)


@pytest.mark.parametrize("fn", [iterates, lists, passes_on, keeps, rebinds, nested,
                                default_is_computed, stores])
def test_anything_else_keeps_the_order(fn):
    assert keyword_order_matters(fn)


def test_a_bound_method_is_read_through_its_function():
    class A:
        def f(self, **kw):
            return kw["a"]

        def g(self, **kw):
            return dict(kw)
    assert not keyword_order_matters(A().f)
    assert keyword_order_matters(A().g)


def test_what_has_no_code_keeps_the_order():
    class Callable:
        def __call__(self, **kw):
            return kw["a"]
    assert keyword_order_matters(Callable())
