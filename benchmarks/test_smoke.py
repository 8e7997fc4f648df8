"""CPU smoke test of the benchmark harness: the whole harness at tiny sizes on
Numba's CUDA simulator, in a subprocess. No timing claims.

    pytest benchmarks/test_smoke.py
"""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench_smoke")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1",
               PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    env.pop("TRACEGRAPH_BACKEND", None)
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "run.py"),
                           "--smoke", "--out", str(out)],
                          cwd=ROOT, env=env, check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"smoke run failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return out


def _results(out):
    with open(out / "results.json") as f:
        return json.load(f)


def test_outputs_written(smoke):
    for name in ("results.json", "results.md", "chart.png"):
        assert (smoke / name).is_file() and (smoke / name).stat().st_size > 0, name
    res = _results(smoke)
    assert res["meta"]["mode"] == "smoke" and res["meta"]["simulator"] is True
    assert {w["id"] for w in res["workloads"]} == {f"W{i}" for i in range(1, 9)}
    assert not [w for w in res["workloads"] if w.get("error")], "a workload crashed"
    assert "not timings" in (smoke / "results.md").read_text()
    with open(smoke / "chart.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_baseline_contenders_run(smoke):
    """The non-tracegraph contenders that work on the simulator ran and checked out."""
    rows = _results(smoke)["rows"]
    bad = [r for r in rows if not r["contender"].startswith("tracegraph") and r["status"] == "error"]
    assert not bad, [(r["workload"], r["contender"], r["note"]) for r in bad]
    eager = [r for r in rows if r["contender"] == "numba_eager"]
    assert eager and all(r["status"] == "ok" for r in eager)
    assert not [r for r in rows if str(r.get("check", "")).startswith("MISMATCH")]
    # contenders that need a GPU are skipped with a note, never faked
    for r in rows:
        if r["contender"].split("_")[0] in ("torch", "cupy", "cpp") or r["contender"] == "numba_capture":
            assert r["status"] == "skipped" and r["note"], r


def test_tracegraph_contenders(smoke):
    res = _results(smoke)
    if not res["meta"]["tracegraph_available"]:
        pytest.skip(f"import tracegraph fails, so the tracegraph contenders were skipped: "
                    f"{res['meta']['tracegraph_import_error']}")
    rows = [r for r in res["rows"] if r["contender"].startswith("tracegraph")]
    assert rows
    failed = [(r["workload"], r["case"], r["contender"], r["status"], r["note"],
               r.get("check")) for r in rows
              if r["status"] != "ok" or str(r.get("check", "")).startswith("MISMATCH")]
    assert not failed, failed


def test_w1_own_process_rows():
    """W1's graph contenders timed in a process of their own print their rows as JSON."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1",
               PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-m", "benchmarks.w1_chain", "tracegraph", "smoke"],
                          cwd=ROOT, env=env, check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [(r["case"], r["status"], r["check"]) for r in rows] == [("N=3", "ok", "ok")]
