"""Publishing a full run (benchmarks/publish.py): the GPU kind from the device name, the
summary table generic over whatever workloads the results hold, the docs section between
its markers, and docs/performance.md holding exactly what the code writes from the
committed results files."""
import copy
import json
import os
import shutil

import pytest

from benchmarks import publish, report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KINDS = ("h100", "h200")


def _results(kind):
    with open(os.path.join(ROOT, "benchmarks", f"results-{kind}.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("name, kind", [
    ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200", "h200"),
    ("NVIDIA A100-SXM4-80GB", "a100"), ("NVIDIA GeForce RTX 4090", "nvidia-geforce-rtx-4090"),
    (None, None)])
def test_gpu_kind_from_the_device_name(name, kind):
    assert publish.gpu_kind(name) == kind


@pytest.mark.parametrize("kind", KINDS)
def test_docs_hold_what_the_code_writes(kind):
    with open(os.path.join(ROOT, "docs", "performance.md")) as f:
        text = f.read()
    body = publish.section(_results(kind), kind)
    assert f"<!-- results:{kind} -->\n{body}\n<!-- /results:{kind} -->" in text, \
        f"run `python benchmarks/run.py --publish benchmarks/results-{kind}.json`"


def test_replace_section_keeps_the_rest_and_appends_a_new_kind():
    text = "intro\n<!-- results:h100 -->\nold\n<!-- /results:h100 -->\n\nafter\n"
    out = publish.replace_section(text, "h100", "new")
    assert out == "intro\n<!-- results:h100 -->\nnew\n<!-- /results:h100 -->\n\nafter\n"
    out = publish.replace_section(out, "b200", "more")
    assert out.index("<!-- /results:h100 -->") < out.index("<!-- results:b200 -->\nmore\n") \
        < out.index("after")


def test_summary_follows_the_workloads_in_the_results():
    """A workload the summary code has never heard of gets its rows (W8 and later)."""
    res = copy.deepcopy(_results("h200"))
    res["workloads"].append({"id": "W9", "title": "new", "primary": "step_us",
                             "baseline": "numba_eager"})
    res["rows"] += [
        {"workload": "W9", "case": "batch=4", "contender": c, "status": "ok",
         "metrics": {"step_us": {"median": m, "p10": m, "p90": m}}, "note": ""}
        for c, m in (("numba_eager", 300.0), ("tracegraph", 100.0), ("torch_graph", 80.0))]
    row = [r for r in report.summary_rows(res) if r["workload"] == "W9"]
    assert row == [{"workload": "W9", "case": "batch=4", "metric": "step_us",
                    "tracegraph": ("tracegraph", 100.0), "baseline": ("numba_eager", 300.0),
                    "speedup": 3.0, "fastest_other": ("torch_graph", 80.0)}]
    assert "| W9 | batch=4 | `step_us` | 100 | 300 (numba_eager) | 3x | 80.0 (torch_graph) |" \
        in report.summary_markdown(res)


def test_only_full_gpu_runs_of_every_workload_are_published():
    res = _results("h100")
    ids = [w["id"] for w in res["workloads"]]
    assert publish.why_not(res, ids) is None
    assert "did not run" in publish.why_not(res, [*ids, "W99"])
    assert "quick" in publish.why_not(dict(res, meta=dict(res["meta"], mode="quick")), ids)
    sim = dict(res, meta=dict(res["meta"], simulator=True, gpu=None))
    assert "simulator" in publish.why_not(sim, ids)


def test_publish_writes_the_kind_s_files(tmp_path):
    for sub in ("benchmarks", "docs/img"):
        (tmp_path / sub).mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "docs", "performance.md"), tmp_path / "docs")
    res = _results("h200")
    res["meta"] = dict(res["meta"], gpu="NVIDIA B200")
    written = publish.publish(res, root=str(tmp_path))
    assert [os.path.relpath(p, tmp_path) for p in written] == [
        "benchmarks/results-b200.json", "benchmarks/results-b200.md",
        "docs/img/performance-b200.png", "docs/performance.md"]
    text = (tmp_path / "docs" / "performance.md").read_text()
    assert "<!-- results:b200 -->\n### NVIDIA B200\n" in text
    assert "<!-- results:h100 -->" in text and "<!-- results:h200 -->" in text
    assert (tmp_path / "docs/img/performance-b200.png").read_bytes()[:4] == b"\x89PNG"
    with open(tmp_path / "benchmarks/results-b200.json") as f:
        assert json.load(f)["rows"] == res["rows"]
