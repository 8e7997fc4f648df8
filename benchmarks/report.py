"""Markdown table and PNG chart from the harness's results dictionary."""
import math

METRIC_ORDER = ["step_us", "step_pipelined_us", "step_event_us", "per_node_us",
                "call_us", "call_sync_us", "gbps", "trace_ms", "lower_ms", "first_call_ms",
                "first_call_with_jit_ms", "build_ms", "instantiate_ms"]


def fmt(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    a = abs(v)
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def cell(m):
    if m is None:
        return ""
    if "p10" in m:
        return f"{fmt(m['median'])} ({fmt(m['p10'])}–{fmt(m['p90'])})"
    return fmt(m["median"])


def _metrics(rows):
    names = {k for r in rows for k in r["metrics"]}
    return [m for m in METRIC_ORDER if m in names] + sorted(names - set(METRIC_ORDER))


def speedup(rows, r, primary, baseline):
    """baseline median / this median of the primary metric, same case."""
    if not baseline or r["status"] != "ok" or primary not in r["metrics"]:
        return ""
    base = [b for b in rows if b["case"] == r["case"] and b["contender"] == baseline
            and b["status"] == "ok" and primary in b["metrics"]]
    if not base:
        return ""
    mine = r["metrics"][primary]["median"]
    return f"{base[0]['metrics'][primary]['median'] / mine:.2f}x" if mine > 0 else ""


def markdown(results):
    meta = results["meta"]
    out = [f"# tracegraph benchmarks ({meta['mode']})", ""]
    if meta["mode"] == "smoke":
        out += [("**Smoke run on the Numba CUDA simulator: the numbers below are not timings "
                "of anything and must not be quoted.**"), ""]
    out += [f"- command: `{meta['command']}`", f"- date: {meta['date']}",
            f"- device: {meta.get('gpu') or 'none (simulator)'}",
            "- versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()),
            f"- timing: {meta['timing']}", ""]
    if results["notes"]:
        out += ["Contender notes:", ""] + [f"- {k}: {v}" for k, v in results["notes"].items()] + [""]
    out += [("Cells: median (p10–p90). Times in µs unless the metric ends in _ms; gbps in GB/s. "
            "`vs baseline` = baseline median / this median of the workload's primary metric."), ""]
    out += ["## Summary", "", summary_markdown(results), ""]
    if results.get("targets"):
        out += [targets_markdown(results["targets"])]
    for wl in results["workloads"]:
        rows = [r for r in results["rows"] if r["workload"] == wl["id"]]
        out += [f"## {wl['id']}: {wl['title']}", ""]
        if wl.get("error"):
            out += [f"Workload failed: `{wl['error']}`", ""]
        if not rows:
            continue
        metrics = _metrics(rows)
        base = wl.get("baseline")
        head = ["case", "contender"] + metrics + ([f"vs {base} ({wl['primary']})"] if base else []) \
            + ["check", "status / note"]
        out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in rows:
            cells = [r["case"], r["contender"]] + [cell(r["metrics"].get(m)) for m in metrics]
            if base:
                cells.append(speedup(rows, r, wl["primary"], base))
            status = r["status"] if r["status"] != "ok" else ""
            note = (status + ": " if status else "") + (r.get("note") or "")
            cells += [r.get("check", ""), note.replace("|", "/").replace("\n", " ")[:200]]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def chart(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wls = results["workloads"]
    cols = 4
    nrows = max(1, math.ceil(len(wls) / cols))
    fig, axes = plt.subplots(nrows, cols, figsize=(5 * cols, 4.2 * nrows), squeeze=False)
    for ax in axes.flat[len(wls):]:
        ax.axis("off")
    everyone = list(dict.fromkeys(r["contender"] for r in results["rows"]))
    cmap = plt.get_cmap("tab20")
    color = {name: cmap(i % 20) for i, name in enumerate(everyone)}
    for ax, wl in zip(axes.flat, wls):
        primary = wl["primary"]
        rows = [r for r in results["rows"] if r["workload"] == wl["id"] and r["status"] == "ok"
                and primary in r["metrics"]]
        ax.set_title(f"{wl['id']}: {wl['title']}", fontsize=9)
        if not rows:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
            ax.set_xticks([]); ax.set_yticks([])
            continue
        cases = list(dict.fromkeys(r["case"] for r in rows))
        names = list(dict.fromkeys(r["contender"] for r in rows))
        width = 0.8 / len(names)
        for j, name in enumerate(names):
            xs, ys, lo, hi = [], [], [], []
            for i, case in enumerate(cases):
                hit = [r for r in rows if r["case"] == case and r["contender"] == name]
                if hit:
                    m = hit[0]["metrics"][primary]
                    xs.append(i + (j - (len(names) - 1) / 2) * width)
                    ys.append(m["median"])
                    lo.append(m["median"] - m.get("p10", m["median"]))
                    hi.append(m.get("p90", m["median"]) - m["median"])
            ax.bar(xs, ys, width, yerr=[lo, hi], label=name, capsize=2, color=color[name])
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels(cases, fontsize=8)
        unit = "GB/s" if primary == "gbps" else ("ms" if primary.endswith("_ms") else "µs")
        ax.set_ylabel(f"{primary} ({unit}), median, p10–p90", fontsize=8)
        vals = [r["metrics"][primary]["median"] for r in rows]
        if min(vals) > 0 and max(vals) / min(vals) > 20:
            ax.set_yscale("log")
        ax.legend(fontsize=6)
    title = "tracegraph benchmarks"
    if results["meta"]["mode"] == "smoke":
        title += " — SMOKE RUN ON THE SIMULATOR, NOT TIMINGS"
    fig.suptitle(title + f" ({results['meta'].get('gpu') or 'no GPU'})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------- summary

def _better(primary):
    """Whether a larger value of the metric is better (bandwidth) or a smaller (time)."""
    return primary == "gbps"


def _best(rows, primary):
    if not rows:
        return None
    pick = max if _better(primary) else min
    return pick(rows, key=lambda r: r["metrics"][primary]["median"])


def summary_rows(results):
    """One row per workload and case: tracegraph's best variant, the workload's baseline,
    how many times faster tracegraph is, and the fastest other contender, by the primary
    metric. Rows timed in a process of their own are left to the full tables."""
    out = []
    for wl in results["workloads"]:
        primary, base = wl["primary"], wl.get("baseline")
        rows = [r for r in results["rows"] if r["workload"] == wl["id"] and r["status"] == "ok"
                and primary in r["metrics"] and not r["contender"].endswith("_own_process")]
        for case in dict.fromkeys(r["case"] for r in rows):
            here = [r for r in rows if r["case"] == case]
            mine = _best([r for r in here if r["contender"].startswith("tracegraph")], primary)
            others = [r for r in here if not r["contender"].startswith("tracegraph")]
            baseline = next((r for r in others if r["contender"] == base), None)
            value = mine["metrics"][primary]["median"] if mine else None
            ref = baseline["metrics"][primary]["median"] if baseline else None
            speedup = None
            if value and ref:
                speedup = value / ref if _better(primary) else ref / value
            out.append({"workload": wl["id"], "case": case, "metric": primary,
                        "tracegraph": mine and (mine["contender"], value),
                        "baseline": baseline and (baseline["contender"], ref),
                        "speedup": speedup, "fastest_other": (lambda b: b and (
                            b["contender"], b["metrics"][primary]["median"]))(
                                _best(others, primary))})
    return out


def summary_markdown(results):
    """The summary rows as a Markdown table (docs/performance.md holds one per GPU kind)."""
    def named(pair, plain=None):
        if not pair:
            return ""
        name, v = pair
        return fmt(v) if name == plain else f"{fmt(v)} ({name})"

    out = ["| workload | case | metric | tracegraph | baseline | speedup | fastest other |",
           "|---|---|---|---|---|---|---|"]
    for r in summary_rows(results):
        speed = f"{r['speedup']:.3g}x" if r["speedup"] else ""
        out.append(f"| {r['workload']} | {r['case']} | `{r['metric']}` | "
                   f"{named(r['tracegraph'], 'tracegraph')} | {named(r['baseline'])} | "
                   f"{speed} | {named(r['fastest_other'])} |")
    return "\n".join(out)


# ---------------------------------------------------------------- targets

def _med(results, wl, case, contender, metric):
    for r in results["rows"]:
        if (r["workload"], r["case"], r["contender"]) == (wl, case, contender) \
                and r["status"] == "ok" and metric in r["metrics"]:
            return r["metrics"][metric]["median"]
    return None


def targets(results):
    """Each target against this run: measured value and verdict."""
    smoke = results["meta"]["mode"] == "smoke"
    g = lambda *k: _med(results, *k)
    tg_w1 = g("W1", "N=100", "tracegraph", "step_us")
    rows = []

    def ratio(a, b):
        return a / b if a is not None and b is not None and b > 0 else None

    def add(name, value, ok, unit, how):
        if smoke:
            value, verdict = None, "not a timing run"
        elif value is None:
            verdict = "not measured"
        else:
            verdict = "met" if ok(value) else "MISSED"
        rows.append({"target": name, "measured": value, "unit": unit, "verdict": verdict, "how": how})

    add("W1 N=100: >= 20x faster than Numba eager",
        ratio(g("W1", "N=100", "numba_eager", "step_us"), tg_w1), lambda v: v >= 20, "x",
        "numba_eager step_us / tracegraph step_us")
    add("W1 N=100: per node within 1.05x of the C++ graph",
        ratio(g("W1", "N=100", "tracegraph", "per_node_us"), g("W1", "N=100", "cpp_graph", "per_node_us")),
        lambda v: v <= 1.05, "x", "tracegraph per_node_us / cpp_graph per_node_us (pipelined)")
    add("W1 N=100, each graph in a process of its own: per node within 1.05x of the C++ graph",
        ratio(g("W1", "N=100", "tracegraph_own_process", "per_node_us"),
              g("W1", "N=100", "cpp_graph", "per_node_us")),
        lambda v: v <= 1.05, "x",
        "tracegraph_own_process per_node_us / cpp_graph per_node_us (pipelined; the C++ "
        "binary runs in a process of its own too)")
    add("W1 N=100: faster than torch.cuda.graph",
        ratio(g("W1", "N=100", "torch_graph", "step_us"), tg_w1), lambda v: v > 1, "x",
        "torch_graph step_us / tracegraph step_us")
    add("W1 N=100: faster than CuPy graph",
        ratio(g("W1", "N=100", "cupy_graph", "step_us"), tg_w1), lambda v: v > 1, "x",
        "cupy_graph step_us / tracegraph step_us")
    w2 = [r["case"] for r in results["rows"] if r["workload"] == "W2"]
    case2 = w2[0] if w2 else ""
    add("W2: >= 6.5x faster than single-stream capture",
        ratio(g("W2", case2, "numba_capture", "step_us"), g("W2", case2, "tracegraph", "step_us")),
        lambda v: v >= 6.5, "x", "numba_capture step_us / tracegraph step_us")
    add("W5: < 30 ms for 1,000 launches, excluding Numba JIT",
        g("W5", "1000 launches", "tracegraph", "first_call_ms"), lambda v: v < 30, "ms",
        "first call of a fresh tg.compile (trace + passes + lower + instantiate + 1 launch)")
    add("W7: < 8 µs per replay, unchanged inputs",
        g("W7", "unchanged", "tracegraph", "call_us"), lambda v: v < 8, "µs",
        "replay calls back to back, no sync, host time per call")
    # against the peers of the same run
    w7 = lambda who: g("W7", "unchanged", who, "call_us")  # noqa: E731
    add("W7: replay within 1.3x of cuda.core's Graph.launch of a capture",
        ratio(w7("tracegraph"), w7("numba_capture")), lambda v: v <= 1.3, "x",
        "tracegraph call_us / numba_capture call_us (legacy default stream / created stream)")
    add("W7: replay within 1.5x of CuPy's Graph.launch",
        ratio(w7("tracegraph"), w7("cupy_graph")), lambda v: v <= 1.5, "x",
        "tracegraph call_us / cupy_graph call_us (legacy default stream / non-blocking stream)")
    add("W7: replay on a non-blocking stream within 1.5x of CuPy's Graph.launch there",
        ratio(w7("tracegraph_stream"), w7("cupy_graph")), lambda v: v <= 1.5, "x",
        "tracegraph_stream call_us / cupy_graph call_us (both on a non-blocking stream)")
    add("W5: first call at or below Numba stream capture's",
        ratio(g("W5", "1000 launches", "tracegraph", "first_call_ms"),
              g("W5", "1000 launches", "numba_capture", "first_call_ms")), lambda v: v <= 1.0,
        "x", "tracegraph first_call_ms / numba_capture first_call_ms")
    return rows


def targets_markdown(rows):
    out = ["## Targets", "", "| target | measured | verdict | how |", "|---|---|---|---|"]
    for t in rows:
        v = "" if t["measured"] is None else f"{fmt(t['measured'])} {t['unit']}"
        out.append(f"| {t['target']} | {v} | {t['verdict']} | {t['how']} |")
    return "\n".join(out + [""])
