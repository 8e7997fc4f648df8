"""A full run as the project's current numbers for its GPU kind: benchmarks/results-<kind>.json
and .md (every row and metric), docs/img/performance-<kind>.png (the chart) and the section of
docs/performance.md between `<!-- results:<kind> -->` and `<!-- /results:<kind> -->` (a
summary table and the targets), all from the results dictionary alone.

    python benchmarks/run.py --publish benchmarks/results-h100.json   # rewrite from a JSON
"""
from __future__ import annotations

import json
import os
import re

from benchmarks import report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def gpu_kind(name: str | None) -> str | None:
    """"NVIDIA H100 80GB HBM3" -> "h100", "NVIDIA H200" -> "h200": the model's letters and
    digits (a name without such a token: its words joined by dashes)."""
    if not name:
        return None
    hit = re.search(r"\b([A-Z]{1,2}\d{2,4})\b", name.upper())
    if hit:
        return hit.group(1).lower()
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or None


def why_not(results: dict, workloads: list[str]) -> str | None:
    """Why this run cannot stand as its GPU's current numbers (None: it can)."""
    meta = results["meta"]
    if meta.get("simulator") or not meta.get("gpu"):
        return "a run on the simulator times nothing"
    if meta.get("mode") != "full":
        return f"a {meta.get('mode')} run (publish full runs only)"
    missing = [w for w in workloads if w not in {wl["id"] for wl in results["workloads"]}]
    if missing:
        return f"workloads {missing} did not run"
    return None


def _versions(meta: dict) -> str:
    keep = ("numba", "numba-cuda", "cuda-core", "cuda-bindings", "torch", "cupy-cuda13x",
            "cupy-cuda12x", "python", "numpy")
    return ", ".join(f"{k} {v}" for k, v in meta.get("versions", {}).items() if k in keep)


def _targets(rows: list[dict]) -> str:
    out = ["| target | measured | verdict |", "|---|---|---|"]
    for t in rows:
        v = "" if t["measured"] is None else f"{report.fmt(t['measured'])} {t['unit']}"
        out.append(f"| {t['target']} | {v} | {t['verdict']} |")
    return "\n".join(out)


def section(results: dict, kind: str) -> str:
    """The text between the kind's markers in docs/performance.md."""
    meta = results["meta"]
    cc = ".".join(map(str, meta.get("compute_capability") or ()))
    commit = f"; tracegraph at {meta['git']}" if meta.get("git") else ""
    return "\n".join([
        f"### {meta['gpu']}", "",
        f"Compute capability {cc}{commit}; {_versions(meta)}. Regenerate on this GPU with "
        f"`python benchmarks/run.py --out results/`, or from the results file with "
        f"`python benchmarks/run.py --publish benchmarks/results-{kind}.json`. Every row and "
        f"metric, with p10–p90: [benchmarks/results-{kind}.md](../benchmarks/results-{kind}.md).",
        "",
        "Medians of each workload's primary metric (µs, or ms for `_ms`). `speedup` = baseline "
        "/ tracegraph; tracegraph's best variant where it has several.", "",
        report.summary_markdown(results), "",
        _targets(results.get("targets") or report.targets(results)), "",
        f"![benchmarks on an {meta['gpu']}](img/performance-{kind}.png)",
    ])


def replace_section(text: str, kind: str, body: str) -> str:
    """`text` with the kind's section replaced by `body`; a kind seen for the first time gets
    its markers after the last kind's section (or at the end)."""
    start, end = f"<!-- results:{kind} -->", f"<!-- /results:{kind} -->"
    block = f"{start}\n{body}\n{end}"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        return head + block + rest.split(end, 1)[1]
    ends = list(re.finditer(r"<!-- /results:[\w-]+ -->", text))
    at = ends[-1].end() if ends else len(text.rstrip("\n"))
    return text[:at] + "\n\n" + block + text[at:]


def publish(results: dict, root: str = ROOT) -> list[str]:
    """Write the kind's results files, chart and docs section; return the paths written."""
    kind = gpu_kind(results["meta"].get("gpu"))
    if kind is None:
        raise ValueError("the results name no GPU")
    results = dict(results, targets=report.targets(results))
    stem = os.path.join(root, "benchmarks", f"results-{kind}")
    with open(stem + ".json", "w") as f:
        json.dump(results, f, indent=1, default=str)
    with open(stem + ".md", "w") as f:
        f.write(report.markdown(results))
    chart = os.path.join(root, "docs", "img", f"performance-{kind}.png")
    report.chart(results, chart)
    doc = os.path.join(root, "docs", "performance.md")
    with open(doc) as f:
        text = f.read()
    with open(doc, "w") as f:
        f.write(replace_section(text, kind, section(results, kind)))
    return [stem + ".json", stem + ".md", chart, doc]
