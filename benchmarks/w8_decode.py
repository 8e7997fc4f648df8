"""W8: an LLM decode step, examples/decode_step.py's GPT-style decoder with a KV cache
(layer norm, fused QKV, attention over the cache up to `pos`, GELU MLP, tied output
layer, greedy argmax), tokens/s at batch 1, 8, 37 and 64 on two configs: the example's
(vocab 2,048, d_model 256, 8 heads, 4 layers, d_ff 1,024) and a GPT-2-small-sized one
(vocab 50,257, d_model 768, 12 heads, 12 layers, d_ff 3,072), float32, 128 positions.

A sample is `steps` decode steps (pos 0, 1, ...) issued back to back from a synchronized
device to a synchronized device; step_us = its time / steps, tokens_per_s = batch / step.
Contenders: tracegraph (one graph per bucket of 1, 2, 4, ..., 64; pos patched per call;
37 runs in bucket 64), eager Numba (the same nodes launched one by one), PyTorch eager,
torch.cuda.graph (one capture per bucket, pos in a device tensor, attention masked past
pos), torch.compile(mode="reduce-overhead") where it compiles. Beside them at batch 1:
the bandwidth bound, the weight bytes a step reads over the copy bandwidth (2 x bytes of
a device-to-device copy per second) measured in the same run. Each contender's logits of
one step are checked against the example's NumPy float64 reference.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import time

import numpy as np

from benchmarks.common import Skip, error_row, row, stats

ID = "W8"
TITLE = "LLM decode step (KV cache), tokens/s per batch"
PRIMARY = "step_us"
BASELINE = "torch_graph"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_module = None


def example():
    """examples/decode_step.py as a module (it imports its _support first)."""
    global _module
    if _module is None:
        path = os.path.join(ROOT, "examples")
        if path not in sys.path:
            sys.path.insert(0, path)
        spec = importlib.util.spec_from_file_location("tracegraph_example_decode_step",
                                                      os.path.join(path, "decode_step.py"))
        _module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(_module)
    return _module


def configs(D, cfg):
    if cfg.smoke:
        return {"tiny": D.Config(vocab=32, d_model=16, heads=2, layers=1, d_ff=16, max_len=8)}
    return {"small": D.Config(vocab=2048, d_model=256, heads=8, layers=4, d_ff=1024,
                              max_len=128),
            "gpt2": D.Config(vocab=50257, d_model=768, heads=12, layers=12, d_ff=3072,
                             max_len=128)}


def sizes(cfg, config):
    if cfg.smoke:
        return {"batches": [3], "steps": 1, "repeats": 1}
    if cfg.mode == "quick":
        return {"batches": [1, 64] if config == "small" else [1], "steps": 32, "repeats": 3}
    return {"batches": [1, 8, 37, 64], "steps": 64, "repeats": 5}


# torch.compile's first calls (compile, record) per config, past which it is not timed
COMPILE_BUDGET_S = 60


def time_steps(env, step, steps, repeats):
    """Seconds per step of `repeats` samples of `steps` steps (pos 0..steps-1), after one
    sample of warm-up."""
    for pos in range(steps):
        step(pos)
    env.sync()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for pos in range(steps):
            step(pos)
        env.sync()
        samples.append((time.perf_counter() - t0) / steps)
    return samples


def host_call_us(env, step, steps):
    """Median host time of one call (it returns once the step is enqueued), synchronizing
    between calls: what the call itself costs on the CPU."""
    times = []
    for pos in range(steps):
        t0 = time.perf_counter()
        step(pos)
        times.append(time.perf_counter() - t0)
        env.sync()
    return stats(np.array(times) * 1e6)


def copy_bandwidth(env, nbytes=1 << 30, repeats=5):
    """Bytes read and written per second by a device-to-device copy of `nbytes`."""
    from numba import cuda
    src, dst = cuda.device_array(nbytes, np.uint8), cuda.device_array(nbytes, np.uint8)
    dst.copy_to_device(src)
    env.sync()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        dst.copy_to_device(src)
        env.sync()
        samples.append(time.perf_counter() - t0)
    return 2 * nbytes / float(np.median(samples))


def weight_bytes(D, params):
    """What one batch-1 step reads of the weights: every array but the position table, of
    which it reads one row (the tied embedding is read whole by the output layer)."""
    leaves = [params.emb, params.lnf_w, params.lnf_b] + \
        [a for layer in params.layers for a in layer]
    return sum(a.nbytes for a in leaves) + params.wpe[0].nbytes


def run(env, native=None):
    D = example()
    rows = []
    bandwidth = copy_bandwidth(env) if env.gpu else None
    done = []
    wanted = os.environ.get("W8_CONFIGS", "")  # e.g. "small": a run short of device time
    for name, c in configs(D, env.cfg).items():
        if wanted and name not in wanted.split(","):
            continue
        config = Config(env, D, name, c, sizes(env.cfg, name), bandwidth)
        rows += config.rows()
        done.append(config)
    for config in done:  # last: its compiles take the longest
        rows += config.rows(compiled=True)
    return rows


class Config:
    """One model config: its weights, cache and contenders, timed batch by batch."""

    def __init__(self, env, D, name, c, s, bandwidth):
        from numba import cuda
        self.env, self.D, self.name, self.c, self.s = env, D, name, c, s
        self.bandwidth = bandwidth
        self.params = D.init_params(c)
        self.d_params = D.params_map(cuda.to_device, self.params)
        self.slots = D.bucket_of(max(s["batches"]))
        self.kc, self.vc = D.new_cache(c, self.slots)
        rng = np.random.default_rng(7)
        self.first = {b: rng.integers(0, c.vocab, b).astype(np.int32) for b in s["batches"]}
        self.refs = {b: D.Reference(self.params, c, b).step(self.first[b], 0)
                     for b in s["batches"]}
        self.tg = env.tg.compile(D.decode_body, dynamic={"tokens": 0, "pos": "value"},
                                 buckets=D.BUCKETS, backend="cuda" if env.gpu else "sim") \
            if env.tg is not None else None
        self.torch_compiled = None
        self.compile_s = 0.0

    def case(self, batch):
        return f"{self.name} batch={batch}"

    def rows(self, compiled=False):
        """Every contender's rows but torch.compile's, or (compiled) only those."""
        out = []
        contenders = (("tracegraph", self.tracegraph), ("numba_eager", self.numba_eager),
                      ("torch_eager", self.torch_eager), ("torch_graph", self.torch_graph))
        for batch in self.s["batches"]:
            if batch == 1 and self.bandwidth and not compiled:
                out.append(self.bound_row())
            for contender, build in ((("torch_compile", self.torch_compile),) if compiled
                                     else contenders):
                out.append(self.measure(batch, contender, build))
                shown = out[-1]["metrics"].get("tokens_per_s", {}).get("median")
                print(f"  [W8] {out[-1]['case']:>16} {contender:<14} {out[-1]['status']:<8} "
                      f"{shown if shown is not None else out[-1]['note'][:150]} tokens/s "
                      f"{out[-1].get('check', '')}", flush=True)
        return out

    def bound_row(self):
        nbytes = weight_bytes(self.D, self.params)
        step = nbytes / self.bandwidth
        metrics = {"step_us": {"median": step * 1e6, "n": 1},
                   "tokens_per_s": {"median": 1 / step, "n": 1}}
        return row(ID, self.case(1), "bandwidth_bound", metrics=metrics,
                   note=f"{nbytes / 1e6:.1f} MB of weights a step over "
                        f"{self.bandwidth / 1e9:.0f} GB/s (2 x bytes of a 1 GiB device-to-"
                        "device copy per second, this run)", check="n/a")

    def measure(self, batch, contender, build):
        case = self.case(batch)
        try:
            step, check, note, extra = build(batch)
        except Skip as e:
            return row(ID, case, contender, status="skipped", note=str(e))
        except Exception as e:
            return error_row(ID, case, contender, e)
        try:
            samples = np.array(time_steps(self.env, step, self.s["steps"], self.s["repeats"]))
            metrics = {"step_us": stats(samples * 1e6), "tokens_per_s": stats(batch / samples)}
            metrics.update(extra())
            msg = check()
            return row(ID, case, contender, metrics=metrics, note=note,
                       check="ok" if not msg else f"MISMATCH: {msg}")
        except Exception as e:
            return error_row(ID, case, contender, e)

    def compare(self, batch, logits):
        from benchmarks.common import compare
        return compare(np.asarray(logits)[:batch], self.refs[batch], rtol=1e-3, atol=1e-3)

    # -- contenders: each returns (step(pos), check() -> None or a message, note, extra())

    def tracegraph(self, batch):
        if self.tg is None:
            raise Skip(f"import tracegraph failed: {self.env.tg_error}")
        from numba import cuda
        f, env = self.tg, self.env
        tokens = cuda.to_device(self.first[batch])
        args = (self.kc, self.vc, self.d_params)
        f(tokens, 0, *args)
        env.sync()

        def step(pos):
            f(tokens, pos, *args)

        def check():
            tokens.copy_to_device(self.first[batch])
            return self.compare(batch, self.D._support.host(f(tokens, 0, *args)))
        nodes = len(f.latest.plan.nodes)
        note = (f"bucket {self.D.bucket_of(batch)}: {nodes} graph nodes; host_call_us: "
                "the call's own time")
        return step, check, note, \
            lambda: {"host_call_us": host_call_us(env, step, self.s["steps"])}

    def numba_eager(self, batch):
        from numba import cuda
        if self.tg is None:
            raise Skip("needs tracegraph's plan (the same nodes)")
        b = self.D.bucket_of(batch)
        tokens = np.zeros(b, np.int32)
        tokens[:batch] = self.first[batch]
        d_tokens = cuda.to_device(tokens)
        eager = self.D.EagerDecode(d_tokens, self.kc, self.vc, self.d_params, step=self.tg)

        def check():
            d_tokens.copy_to_device(tokens)
            eager.run(0, batch)
            return self.compare(batch, self.D._support.host(eager.logits))
        return (lambda pos: eager.run(pos, batch)), check, \
            f"tracegraph's {eager.launches} nodes launched one by one", dict

    def _torch(self):
        torch = self.env.torch
        if torch is None:
            raise Skip(self.env.notes.get("torch", "torch unavailable"))
        if not hasattr(self, "tp"):
            self.tp = self.D.torch_params(self.params, "cuda")
            self.tk = torch.as_tensor(self.kc, device="cuda")  # the same memory, no copy
            self.tv = torch.as_tensor(self.vc, device="cuda")
        return torch

    def torch_eager(self, batch):
        torch = self._torch()
        tokens = torch.as_tensor(self.first[batch], device="cuda")

        def step(pos):
            with torch.inference_mode():
                self.D.torch_step(self.tp, tokens, pos, self.tk, self.tv)

        def check():
            tokens.copy_(torch.as_tensor(self.first[batch], device="cuda"))
            with torch.inference_mode():
                logits = self.D.torch_step(self.tp, tokens, 0, self.tk, self.tv)
            return self.compare(batch, logits.cpu().numpy())
        return step, check, "attention over the cache's first pos+1 positions", dict

    def torch_graph(self, batch):
        torch = self._torch()
        if not hasattr(self, "graphs"):
            buckets = sorted({self.D.bucket_of(b) for b in self.s["batches"]})
            # (no_grad, not inference_mode: the recorded graphs' buffers are updated in
            # place by every step, outside any inference_mode block)
            with torch.no_grad():
                self.graphs = self.D.TorchGraphs(self.tp, self.tk, self.tv, buckets)
        graphs = self.graphs
        first = torch.as_tensor(self.first[batch], device="cuda")
        b = graphs.start(first)

        def check():
            graphs.start(first)
            graphs.step(b, 0)
            return self.compare(batch, graphs.logits[b].cpu().numpy())
        return (lambda pos: graphs.step(b, pos)), check, \
            f"bucket {b}; attention over all {self.c.max_len} positions, masked past pos", dict

    def torch_compile(self, batch):
        torch = self._torch()
        if os.environ.get("W8_TORCH_COMPILE", "1") == "0":
            raise Skip("not run: W8_TORCH_COMPILE=0 (a run short of device time)")
        if self.compile_s > COMPILE_BUDGET_S:
            raise Skip(f"torch.compile's first calls took {self.compile_s:.0f} s on this "
                       f"config so far, past the {COMPILE_BUDGET_S} s budget")
        if self.torch_compiled is None:
            # weights and caches at fixed addresses: the recorded graphs read them in place
            # (inputs not so marked are copied into the graph's own buffers every call)
            self.D.params_map(torch._dynamo.mark_static_address, self.tp)
            torch._dynamo.mark_static_address(self.tk)
            torch._dynamo.mark_static_address(self.tv)
            self.torch_compiled = torch.compile(self.D.torch_step, mode="reduce-overhead")
        fn = self.torch_compiled
        b = self.D.bucket_of(batch)
        tokens = torch.zeros(b, dtype=torch.int32, device="cuda")
        pos_t = torch.zeros(1, dtype=torch.int64, device="cuda")
        torch._dynamo.mark_static_address(tokens)
        torch._dynamo.mark_static_address(pos_t)
        out = {}

        def start():
            tokens.zero_()
            tokens[:batch].copy_(torch.as_tensor(self.first[batch], device="cuda"))

        def step(pos):
            pos_t.fill_(pos)
            with torch.inference_mode():
                out["logits"] = fn(self.tp, tokens, pos_t, self.tk, self.tv)

        start()
        t0 = time.perf_counter()
        for pos in range(3):  # compile, then the warm-up runs reduce-overhead records after
            step(pos)
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - t0
        self.compile_s += compile_s

        def check():
            start()
            step(0)
            return self.compare(batch, out["logits"].cpu().numpy())
        return step, check, (f"bucket {b}, static shapes as torch.cuda.graph's; first calls "
                             f"(compile, record) {compile_s:.1f} s"), dict
