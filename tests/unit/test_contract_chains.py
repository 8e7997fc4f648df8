"""What the Python-state contract reads from a function's bytecode (contract/chains.py):
the global and closure names its code and nested code load, and the attribute chains
loaded from them and from its parameters; the attribute and global names it stores. The
bytecode differs between Python versions, so the same cases run on every supported
interpreter found on this machine (3.11, 3.12, 3.13), each in its own process, loading
chains.py alone (it needs nothing but `dis`)."""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

CHAINS = os.path.join(os.path.dirname(__file__), "..", "..", "tracegraph", "contract",
                      "chains.py")

CASES = r'''
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("chains", sys.argv[1])
chains = importlib.util.module_from_spec(spec)
sys.modules["chains"] = chains
spec.loader.exec_module(chains)

def outer():
    c = 5
    d = 6

    def attributes(self, x, *args, k=1, **kw):
        a = CFG.scale
        b = self.cfg.temperature
        m = np.zeros(3)
        self.helper(x)
        self.kern[1, 2](x, self.cfg.temperature)
        x.shape
        kw.items
        return a, b, m, c.real, k.bit_length

    def augmented(self):
        self.t += 1
        G.count += 1
        self.u += self.dt
        self.a.b += G.step

    def nested(self, x):
        y = [z.a for z in x]
        g = lambda q: CFG.other + q + d
        return g, y, (lambda: self.w)

    def shadowed(self, x):
        x = 3
        def inner(c):
            return c.real
        return x.real, inner

    def captured(self):
        g = lambda: self.w
        return self.x, g

    def stores(self):
        global G
        G = 1
        self.a = 2
        del self.b

    def copied_over(self, cfg, names):
        launch = Box()
        launch.omega = cfg.omega  # a store into a local's attribute of the same name
        launch.total += cfg.total
        tags = [cfg for cfg in names]  # (inlined from 3.12: the loop's own cfg)
        pairs = {k: [cfg for cfg in v] for k, v in names}
        later = [lambda: cfg for cfg in names]  # (a cell on 3.12+)
        return launch, tags, pairs, later

    return {f.__name__: f for f in (attributes, augmented, nested, shadowed, captured, stores,
                                    copied_over)}

out = {}
for name, f in outer().items():
    code = f.__code__
    count = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 4) \
        + bool(code.co_flags & 8)
    names = chains.names_of(code, code.co_varnames[:count])
    out[name] = {"loaded": [[c.root, c.name, list(c.attributes)] for c in names.loaded],
                 "stored": sorted(c.describe() for c in names.stored)}
print(json.dumps(out))
'''

EXPECTED = {
    "attributes": {"loaded": [
        ["global", "CFG", ["scale"]], ["parameter", "self", ["cfg", "temperature"]],
        ["global", "np", ["zeros"]], ["parameter", "self", ["helper"]],
        ["parameter", "self", ["kern"]], ["parameter", "x", ["shape"]],
        ["parameter", "kw", ["items"]], ["closure", "c", ["real"]],
        ["parameter", "k", ["bit_length"]]], "stored": []},
    "augmented": {"loaded": [["parameter", "self", ["t"]], ["global", "G", ["count"]],
                             ["parameter", "self", ["u"]], ["parameter", "self", ["dt"]],
                             ["parameter", "self", ["a", "b"]], ["global", "G", ["step"]]],
                  "stored": ["G.count", "self.a.b", "self.t", "self.u"]},
    # a comprehension's own variable and a lambda's parameter are not the function's; the
    # closure variable d the lambda reads is, and so is the parameter self it reads
    "nested": {"loaded": [["global", "CFG", ["other"]], ["closure", "d", []],
                          ["parameter", "self", ["w"]]], "stored": []},
    "captured": {"loaded": [["parameter", "self", ["x"]], ["parameter", "self", ["w"]]],
                 "stored": []},
    # a parameter the code assigns is a local: none of its chains are the argument's
    "shadowed": {"loaded": [], "stored": ["x"]},
    "stores": {"loaded": [], "stored": ["G", "self.a", "self.b"]},
    # neither an attribute stored into a local of the same name, nor a comprehension's
    # variable named as a parameter, is the parameter's state
    "copied_over": {"loaded": [["global", "Box", []], ["parameter", "cfg", ["omega"]],
                               ["parameter", "cfg", ["total"]]], "stored": []},
}


def _interpreters() -> dict[str, str]:
    """version -> interpreter, for each supported version found here (this one included)."""
    found = {f"{sys.version_info.major}.{sys.version_info.minor}": sys.executable}
    for minor in (11, 12, 13):
        version = f"3.{minor}"
        if version in found:
            continue
        pattern = os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python")
        candidates = [shutil.which(f"python{version}"), *sorted(glob.glob(pattern))]
        for path in candidates:
            if path and subprocess.run([path, "-c", "pass"], capture_output=True).returncode == 0:
                found[version] = path
                break
    return found


@pytest.mark.parametrize("version", ["3.11", "3.12", "3.13"])
def test_chains_are_the_same_on_every_supported_python(version):
    interpreter = _interpreters().get(version)
    if interpreter is None:
        pytest.skip(f"no Python {version} on this machine")
    done = subprocess.run([interpreter, "-c", CASES, CHAINS], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": ""})
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    for name, expected in EXPECTED.items():
        assert got[name]["stored"] == expected["stored"], name
        assert sorted(map(json.dumps, got[name]["loaded"])) == \
            sorted(map(json.dumps, expected["loaded"])), (name, got[name]["loaded"])
