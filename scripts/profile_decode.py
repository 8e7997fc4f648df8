"""Where a decode step's time goes (GPU only): host time per call and GPU time per node of
an example decode step (examples/decode_step.py or another file with its API).

    python scripts/profile_decode.py host --example examples/decode_step.py --config gpt2 \
        --batches 1,8,37,64 --out DIR            # host and GPU time per step -> DIR/host-*.json
    ncu --graph-profiling node --profile-from-start off --metrics gpu__time_duration.sum \
        --print-kernel-base function --csv --log-file DIR/ncu.csv \
        python scripts/profile_decode.py one-step ...
                                                 # one step between cuProfilerStart/Stop
    python scripts/profile_decode.py table DIR/ncu.csv   # GPU time per node, in order
    NUMBA_ENABLE_CUDASIM=1 python scripts/profile_decode.py python --config layers12 \
        --batches 3,4 --calls 20                 # tracegraph's own Python per call (any
                                                 # backend, the simulator too)

host: per batch, the step's GPU time (64 steps back to back between synchronizations,
median of 5) and the host time of one call (it returns once the graph is launched;
synchronized between calls) when pos changes every call (the patch), when it does not,
and for a batch that is not a bucket (37: padded to 64 and copied back); the top of a
cProfile of 200 calls (--calls) of the padded batch.

python: per batch, the cumulative time per call of each tracegraph function outside the
backend's run of the graph (cProfile, so inflated alike for all): what the call costs in
Python, measurable without a GPU. On the simulator its kernels run inside the backend and
are left out; `layers12` has the GPT-2 config's number of arguments at simulator sizes.
"""
from __future__ import annotations

import argparse
import cProfile
import csv
import importlib.util
import io
import json
import os
import pstats
import statistics
import sys
import time

CONFIGS = {"tiny": dict(vocab=32, d_model=16, heads=2, layers=1, d_ff=16, max_len=8),
           "small": dict(vocab=2048, d_model=256, heads=8, layers=4, d_ff=1024, max_len=128),
           "gpt2": dict(vocab=50257, d_model=768, heads=12, layers=12, d_ff=3072, max_len=128),
           "layers12": dict(vocab=32, d_model=16, heads=2, layers=12, d_ff=16, max_len=8)}


def load(path: str):
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec = importlib.util.spec_from_file_location("profiled_decode_step", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def setup(args):
    import numpy as np
    from numba import cuda
    D = load(args.example)
    cfg = D.Config(**CONFIGS[args.config])
    params = D.init_params(cfg)
    d_params = D.params_map(cuda.to_device, params)
    batches = [int(b) for b in args.batches.split(",")]
    cache = D.new_cache(cfg, D.bucket_of(max(batches)))
    rng = np.random.default_rng(7)
    tokens = {b: cuda.to_device(rng.integers(0, cfg.vocab, b).astype(np.int32)) for b in batches}
    return D, cfg, d_params, cache, tokens, batches


def sync():
    from numba import cuda
    cuda.synchronize()


def gpu_step_us(call, steps, repeats=5):
    for pos in range(steps):
        call(pos)
    sync()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for pos in range(steps):
            call(pos)
        sync()
        samples.append((time.perf_counter() - t0) / steps * 1e6)
    return statistics.median(samples)


def host_call_us(call, positions):
    times = []
    for pos in positions:
        t0 = time.perf_counter()
        call(pos)
        times.append((time.perf_counter() - t0) * 1e6)
        sync()
    return statistics.median(times)


def host(args):
    D, cfg, d_params, (kc, vc), tokens, batches = setup(args)
    step = D.decode_step
    steps = min(64, cfg.max_len)  # positions 0..steps-1
    out = {"example": args.example, "config": args.config, "batches": {}}
    for b in batches:
        def call(pos, t=tokens[b]):
            step(t, pos, kc, vc, d_params)
        call(0)
        sync()
        rec = {"bucket": D.bucket_of(b), "nodes": len(step.latest.plan.nodes),
               "gpu_step_us": gpu_step_us(call, steps, max(1, min(5, args.calls // 40))),
               "host_call_us_pos_changes": host_call_us(call, [p % steps
                                                               for p in range(args.calls)]),
               "host_call_us_same_pos": host_call_us(call, [steps // 2] * args.calls)}
        out["batches"][b] = rec
        print(b, rec, flush=True)
        if b == max(batches) or D.bucket_of(b) != b:
            prof = cProfile.Profile()
            prof.enable()
            for pos in range(args.calls):
                call(pos % steps)
                sync()
            prof.disable()
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(25)
            with open(os.path.join(args.out, f"cprofile-{args.tag}-{b}.txt"), "w") as f:
                f.write(s.getvalue())
    with open(os.path.join(args.out, f"host-{args.tag}.json"), "w") as f:
        json.dump(out, f, indent=1)
    if args.events:
        node_events(args, D, d_params, kc, vc, tokens, [b for b in batches if b in (1, 64)])


# the backend's run of the graph, and the simulator's kernels: not the call's own Python
_LEFT_OUT = ("backends/sim.py", "backends/cuda/fake", "_numba/", "numba")


def python(args):
    D, cfg, d_params, (kc, vc), tokens, batches = setup(args)
    steps = min(8, cfg.max_len)
    for b in batches:
        t = tokens[b]
        for pos in range(3):
            D.decode_step(t, pos, kc, vc, d_params)
        prof = cProfile.Profile()
        prof.enable()
        for pos in range(args.calls):
            D.decode_step(t, pos % steps, kc, vc, d_params)
        prof.disable()
        ours, backend = [], 0.0
        for (path, line, name), (_, calls, own, cum, _) in pstats.Stats(prof).stats.items():
            where = path.replace(os.sep, "/")
            if "/tracegraph/" not in where:
                continue
            if any(k in where for k in _LEFT_OUT):
                backend = max(backend, cum)
            else:
                ours.append((cum, own, calls, f"{where.split('/tracegraph/')[-1]}:{line}:{name}"))
        per = 1e6 / args.calls
        # the callers of the backend's run hold it in their cumulative time: left out
        rows = [r for r in ours if r[0] < backend]
        print(f"== batch {b} (bucket {D.bucket_of(b)}): tracegraph's own Python "
              f"{sum(r[1] for r in ours) * per:.0f} µs a call; cumulative µs and calls a call:")
        for cum, _, calls, name in sorted(rows, reverse=True)[:30]:
            print(f"  {cum * per:10.1f} {calls / args.calls:6.1f}  {name}")


def one_step(args):
    from cuda.bindings import driver
    D, _, d_params, (kc, vc), tokens, batches = setup(args)
    b = batches[0]
    for pos in range(4):
        D.decode_step(tokens[b], pos, kc, vc, d_params)
    sync()
    names = [n.op.name for n in D.decode_step.latest.plan.nodes]
    driver.cuProfilerStart()
    D.decode_step(tokens[b], 5, kc, vc, d_params)
    sync()
    driver.cuProfilerStop()
    print(json.dumps({"plan_nodes": names}))


def events(args):
    D, _, d_params, (kc, vc), tokens, batches = setup(args)
    node_events(args, D, d_params, kc, vc, tokens, batches)


def node_events(args, D, d_params, kc, vc, tokens, batches):
    """GPU time of each node launched on its own (the example's EagerDecode: the graph's
    nodes, the same kernels and sizes), between two CUDA events; median of 20 steps."""
    import numpy as np
    from numba import cuda
    out = {}
    for b in batches:
        bucket = D.bucket_of(b)
        t = np.zeros(bucket, np.int32)
        t[:b] = tokens[b].copy_to_host()
        d_t = cuda.to_device(t)
        eager = D.EagerDecode(d_t, kc, vc, d_params)
        names = [n.op.name for n in D.decode_step.lower(d_t, 0, kc, vc, d_params).nodes]
        eager.run(5, b)
        sync()
        start, stop = cuda.event(), cuda.event()
        times: list[list[float]] = [[] for _ in eager._steps]
        for _ in range(20):
            for i, (launch, a, dynamic) in enumerate(eager._steps):
                if dynamic:
                    a = tuple(5 if k in dynamic and a[k].leaf == _pos_leaf(eager) else
                              b if k in dynamic else x for k, x in enumerate(a))
                start.record()
                launch(*a)
                stop.record()
                stop.synchronize()
                times[i].append(start.elapsed_time(stop) * 1e3)
        rows = [(name, statistics.median(ts)) for name, ts in zip(names, times)]
        total = sum(us for _, us in rows)
        print(f"== GPU time per node launched alone (CUDA events): {args.tag} batch {b}, "
              f"{len(rows)} nodes, {total:.1f} us")
        for i, (name, us) in enumerate(rows):
            print(f"  {i:3d} {name:<40} {us:8.2f} us")
        out[b] = rows
    with open(os.path.join(args.out, f"events-{args.tag}.json"), "w") as f:
        json.dump(out, f, indent=1)


def _pos_leaf(eager) -> int:
    return next(leaf for leaf, path in eager._scalars.items() if path == "pos")


def short(name: str) -> str:
    """A kernel's name as ncu --print-kernel-base function gives it, without Numba's
    namespace and specialization suffix."""
    name = name.split("(")[0].split("$")[0]
    return name.rsplit("::", 1)[-1][:60]


def table(args):
    rows = []
    with open(args.csv) as f:
        lines = [ln for ln in f if ln.startswith('"')]
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "nsecond")
        us = value / 1000 if unit.startswith("n") else value if unit.startswith("u") else \
            value * 1000
        rows.append((short(r["Kernel Name"]), us))
    total = sum(us for _, us in rows)
    by_kind: dict[str, list[float]] = {}
    for name, us in rows:
        by_kind.setdefault(name, []).append(us)
    print(f"{len(rows)} kernels, {total:.1f} us of kernel time in one step")
    for i, (name, us) in enumerate(rows):
        print(f"  {i:3d} {name:<48} {us:8.2f} us")
    print("by kernel:")
    for name, v in sorted(by_kind.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {name:<48} x{len(v):<3d} {sum(v):8.1f} us  ({100 * sum(v) / total:.0f}%)")
    with open(args.csv + ".json", "w") as f:
        json.dump({"kernels": rows, "total_us": total}, f, indent=1)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["host", "python", "one-step", "table", "events"])
    p.add_argument("csv", nargs="?")
    p.add_argument("--example", default=os.path.join("examples", "decode_step.py"))
    p.add_argument("--config", choices=list(CONFIGS), default="small")
    p.add_argument("--batches", default="1,8,37,64")
    p.add_argument("--out", default=".")
    p.add_argument("--tag", default="after")
    p.add_argument("--calls", type=int, default=200, help="calls timed per measurement")
    p.add_argument("--events", action="store_true",
                   help="host: then GPU time per node at batches 1 and 64 (events mode)")
    args = p.parse_args()
    {"host": host, "python": python, "one-step": one_step, "table": table,
     "events": events}[args.mode](args)


if __name__ == "__main__":
    main()
