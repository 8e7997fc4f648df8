"""Run the tracegraph benchmarks and write results.json, results.md
and chart.png.

    python benchmarks/run.py --out results/             # full run, ~5 min on an H200
    python benchmarks/run.py --out results/ --quick     # ~1.5 min
    python benchmarks/run.py --out results/ --only W1,W7
    NUMBA_ENABLE_CUDASIM=1 python benchmarks/run.py --smoke --out /tmp/smoke
    python benchmarks/run.py --publish results/results.json

A full run of every workload on a GPU also publishes itself as that GPU kind's current
numbers (benchmarks/publish.py): benchmarks/results-<kind>.json and .md, the chart
docs/img/performance-<kind>.png and its section of docs/performance.md (`--no-publish`
keeps the tree as it is). `--publish FILE` does the same from a results file, running
nothing.
"""
import argparse
import datetime
import importlib
import json
import os
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
# Small grids are the point here: silence Numba's low-occupancy warning.
os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

WORKLOADS = {"W1": "w1_chain", "W2": "w2_forkjoin", "W3": "w3_mlp", "W4": "w4_cartpole",
             "W5": "w5_compile", "W6": "w6_numpy", "W7": "w7_overhead", "W8": "w8_decode"}


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", help="output directory (required unless --publish)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="fewer sizes and iterations")
    g.add_argument("--smoke", action="store_true",
                   help="tiny sizes on the Numba simulator (needs NUMBA_ENABLE_CUDASIM=1); no timing claims")
    p.add_argument("--only", default="", help="comma-separated workloads, e.g. W1,W2")
    p.add_argument("--no-publish", action="store_true",
                   help="a full run leaves benchmarks/results-<kind>.* and docs/ as they are")
    p.add_argument("--publish", metavar="RESULTS_JSON",
                   help="publish this results file as its GPU kind's numbers; run nothing")
    args = p.parse_args(argv)
    if not args.out and not args.publish:
        p.error("--out is required (or --publish RESULTS_JSON)")
    return args


def publish(results, explicit):
    """Publish `results` where they can stand as their GPU's current numbers; an explicit
    --publish of a run that cannot is an error, a run's own publication is skipped. A
    results file from before a workload existed is published with a note."""
    from benchmarks import publish as pub
    ran = [w["id"] for w in results["workloads"]]
    reason = pub.why_not(results, ran if explicit else list(WORKLOADS))
    missing = [w for w in WORKLOADS if w not in ran]
    if explicit and not reason and missing:
        print(f"[bench] note: {missing} are not in this results file", flush=True)
    if reason:
        if explicit:
            raise SystemExit(f"not published: {reason}")
        print(f"[bench] not published: {reason}", flush=True)
        return
    for path in pub.publish(results):
        print(f"[bench] wrote {os.path.relpath(path, ROOT)}", flush=True)


def git_rev():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], check=False, capture_output=True,
                              text=True, timeout=10).stdout.strip() or None
    except Exception:  # noqa: BLE001
        return None


def main(argv=None):
    args = parse(argv if argv is not None else sys.argv[1:])
    if args.publish:
        with open(args.publish) as f:
            publish(json.load(f), explicit=True)
        return 0
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    only = [w.strip().upper() for w in args.only.split(",") if w.strip()]
    unknown = [w for w in only if w not in WORKLOADS]
    if unknown:
        raise SystemExit(f"unknown workload(s) {unknown}; choose from {list(WORKLOADS)}")
    selected = only or list(WORKLOADS)
    os.makedirs(args.out, exist_ok=True)

    from benchmarks import report
    from benchmarks.common import Config, Env
    cfg = Config.for_mode(mode)
    env = Env(cfg)
    t_start = time.perf_counter()

    native = None
    if "W1" in selected or "W2" in selected or "W5" in selected:
        from benchmarks import w1_chain, w2_forkjoin
        from benchmarks.native import Native
        s1, s2 = w1_chain.sizes(cfg), w2_forkjoin.sizes(cfg)
        ns = sorted(set(s1["ns"]) | ({1000} if "W5" in selected and not cfg.smoke else set()))
        print("[bench] C++ graph: build and run", flush=True)
        native = Native(env, ns, s1["size"], s1["block"], w2_forkjoin.CHAINS, s2["length"])
        if native.error:
            print(f"[bench] C++ graph failed: {native.error}", flush=True)

    notes = dict(env.notes)
    if env.tg is None:
        notes["tracegraph"] = f"import tracegraph failed: {env.tg_error}"
    results = {
        "meta": {"mode": mode, "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
                 "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                 "gpu": env.gpu_name, "compute_capability": env.cc, "simulator": env.sim,
                 "git": git_rev(), "versions": env.versions, "cpp_command": native.cmd if native else None,
                 "timing": ("host perf_counter around step + cuCtxSynchronize, after warm-up "
                            f"({cfg.warmup} steps), GC off; median/p10/p90 of up to {cfg.iters_max} "
                            f"samples; pipelined = {cfg.pipelined_k} steps then one sync, per step"),
                 "tracegraph_available": env.tg is not None, "tracegraph_import_error": env.tg_error},
        "notes": notes, "workloads": [], "rows": [],
    }
    for wid in selected:
        mod = importlib.import_module(f"benchmarks.{WORKLOADS[wid]}")
        info = {"id": wid, "title": mod.TITLE, "primary": mod.PRIMARY, "baseline": mod.BASELINE}
        t0 = time.perf_counter()
        print(f"[bench] {wid}: {mod.TITLE}", flush=True)
        try:
            rows = mod.run(env, native)
        except Exception as e:  # noqa: BLE001  a bug in the workload itself
            rows = []
            info["error"] = f"{type(e).__name__}: {e}"
            info["traceback"] = traceback.format_exc()[-3000:]
            print(f"[bench] {wid} failed: {info['error']}", flush=True)
        info["seconds"] = round(time.perf_counter() - t0, 2)
        for r in rows:
            med = r["metrics"].get(mod.PRIMARY, {}).get("median")
            shown = f"{med:.3f}" if med is not None else r["note"][:100]
            print(f"  {r['case']:>18} {r['contender']:<24} {r['status']:<8} {shown}", flush=True)
        results["workloads"].append(info)
        results["rows"].extend(rows)
        with open(os.path.join(args.out, "results.json"), "w") as f:  # (so far: a run cut
            json.dump(results, f, indent=1, default=str)                # short keeps it)
    results["meta"]["seconds"] = round(time.perf_counter() - t_start, 2)
    results["targets"] = report.targets(results)

    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(report.markdown(results))
    report.chart(results, os.path.join(args.out, "chart.png"))
    print(f"[bench] wrote {args.out}/results.json, results.md, chart.png "
          f"in {results['meta']['seconds']} s", flush=True)
    if not args.no_publish and not only:
        publish(results, explicit=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
