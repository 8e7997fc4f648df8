"""An LLM-style decode step: one token for every sequence of a batch, through a small
GPT-style decoder with a KV cache, as ONE CUDA graph per batch bucket.

One step, for a batch of sequences that are all at position `pos`:

    x = emb[tokens] + wpe[pos]                                   (kernel embed)
    L times:  q, k, v = split(layer_norm(x) @ wqkv + bqkv)       (ops.layer_norm, ops.linear)
              c = attention(q, k_cache[l, :, :, :pos+1], ...)     (ops.decode_attention: it
                  after writing k, v at pos                        also writes k, v at pos)
              x = x + c @ wo + bo                                 (ops.linear, residual=x)
              x = x + gelu(layer_norm(x) @ w1 + b1) @ w2 + b2     (ops.layer_norm, ops.linear
                                                                   with its GELU epilogue and
                                                                   residual=x)
    tokens = argmax(layer_norm(x) @ emb.T, axis=-1)               (ops.linear(transpose_w=True):
                                                                   tied embeddings, no copy;
                                                                   ops.argmax)

Each ops.linear is one node with the bias, the GELU and the residual applied in it: a
cuBLASLt node with its epilogue on a GPU with nvmath-python, else (the simulator) a GEMV
kernel for buckets of up to four rows. A layer is 7 nodes, beside them the memsets of
the attention's (and the GEMVs') ticket counters, which depend on nothing.

`decode_step` is compiled with `dynamic={"tokens": 0, "pos": "value"}`: the batch (axis 0
of `tokens`) goes through buckets, and `pos` is a kernel parameter patched on every call,
so all the steps of all the batch sizes of one bucket replay one graph. The greedy tokens
are written into `tokens` in place: the next step's input.

The KV cache is the caller's: two device arrays (layers, slots, heads, max_len, head_dim)
allocated once, written in place, with `slots` the largest bucket; a batch uses slots
0..n-1. It is not a dynamic argument: a written dynamic argument whose length is not a
bucket is padded by copying it (and copied back after the call), which for a cache would
be a copy of the whole cache on every step. The attention writes the cache only for the
true batch (`rows=tg.length()`), so a padded bucket never writes a slot of a real row;
everything else is row by row, so padding rows change no real row.

    python examples/decode_step.py            (on a GPU, also: the decode benchmark)
"""
from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import _support  # first: picks the GPU, or Numba's simulator before Numba loads
import numpy as np
from numba import cuda

import tracegraph as tg
from tracegraph import ops

BUCKETS = (1, 2, 4, 8, 16, 32, 64)
EPS = 1e-5  # layer norm (ops.layer_norm's default, as PyTorch's)

# Launch size of the embedding kernel. The simulator runs one Python thread per CUDA
# thread: few threads there, looping over the elements (as tracegraph.ops do).
THREADS = 256 if _support.GPU else 8
MAX_BLOCKS = 1024 if _support.GPU else 4


def grid_1d(total: int) -> tuple[int, int]:
    """(blocks, threads) of a grid-stride loop over `total` elements."""
    return max(1, min(MAX_BLOCKS, -(-total // THREADS))), THREADS


# ---------------------------------------------------------------------------
# the model's parameters (a pytree of arrays: NamedTuples of NumPy or device arrays)

class Config(NamedTuple):
    vocab: int
    d_model: int
    heads: int
    layers: int
    d_ff: int
    max_len: int


class Layer(NamedTuple):
    ln1_w: Any
    ln1_b: Any
    wqkv: Any   # (d, 3d): q, k, v side by side
    bqkv: Any
    wo: Any
    bo: Any
    ln2_w: Any
    ln2_b: Any
    w1: Any     # (d, d_ff)
    b1: Any
    w2: Any     # (d_ff, d)
    b2: Any


class Params(NamedTuple):
    emb: Any    # (vocab, d): token embedding, also the output projection (tied)
    wpe: Any    # (max_len, d): learned positions
    layers: tuple
    lnf_w: Any
    lnf_b: Any


def init_params(cfg: Config, seed: int = 0) -> Params:
    rng = np.random.default_rng(seed)
    d, f = cfg.d_model, cfg.d_ff

    def w(*shape: int, scale: float) -> np.ndarray:
        return (scale * rng.standard_normal(shape)).astype(np.float32)

    layers = tuple(Layer(1 + w(d, scale=0.1), w(d, scale=0.1),
                         w(d, 3 * d, scale=d ** -0.5), w(3 * d, scale=0.1),
                         w(d, d, scale=d ** -0.5), w(d, scale=0.1),
                         1 + w(d, scale=0.1), w(d, scale=0.1),
                         w(d, f, scale=d ** -0.5), w(f, scale=0.1),
                         w(f, d, scale=f ** -0.5), w(d, scale=0.1))
                   for _ in range(cfg.layers))
    return Params(w(cfg.vocab, d, scale=0.5), w(cfg.max_len, d, scale=0.3), layers,
                  1 + w(d, scale=0.1), w(d, scale=0.1))


def params_map(fn: Callable[[Any], Any], p: Params) -> Params:
    """`fn` applied to every array of the parameters."""
    return Params(fn(p.emb), fn(p.wpe), tuple(Layer(*map(fn, layer)) for layer in p.layers),
                  fn(p.lnf_w), fn(p.lnf_b))


def new_cache(cfg: Config, slots: int) -> tuple[Any, Any]:
    """The KV cache: (layers, slots, heads, max_len, head_dim) float32 device arrays (a
    layer's cache is one contiguous block)."""
    shape = (cfg.layers, slots, cfg.heads, cfg.max_len, cfg.d_model // cfg.heads)
    return cuda.to_device(np.zeros(shape, np.float32)), cuda.to_device(np.zeros(shape, np.float32))


# ---------------------------------------------------------------------------
# the one kernel tracegraph.ops has no op for

@cuda.jit
def embed(tokens, pos, emb, wpe, x):
    """x[b] = emb[tokens[b]] + wpe[pos] (padding rows hold token 0: the padded copy's)."""
    d = x.shape[1]
    for i in range(cuda.grid(1), x.shape[0] * d, cuda.gridsize(1)):
        b, j = i // d, i % d
        x[b, j] = emb[tokens[b], j] + wpe[pos, j]


# ---------------------------------------------------------------------------
# the decode step: one graph per bucket

def decoder_layer(x, p: Layer, pos, n, k_cache, v_cache):
    """One pre-norm transformer block for the new token of every row; k_cache, v_cache
    are this layer's (slots, heads, max_len, head_dim)."""
    rows, d = x.shape
    heads, dh = k_cache.shape[1], k_cache.shape[3]
    h = ops.layer_norm(x, p.ln1_w, p.ln1_b, EPS)
    qkv = ops.linear(h, p.wqkv, p.bqkv).reshape(rows, 3, heads, dh)
    context = ops.decode_attention(qkv[:, 0], k_cache, v_cache, pos, k=qkv[:, 1],
                                   v=qkv[:, 2], rows=n)
    x = ops.linear(context.reshape(rows, d), p.wo, p.bo, residual=x)
    h = ops.layer_norm(x, p.ln2_w, p.ln2_b, EPS)
    u = ops.linear(h, p.w1, p.b1, activation="gelu")
    return ops.linear(u, p.w2, p.b2, residual=x)


def decode_body(tokens, pos, k_cache, v_cache, params: Params):
    """One decode step (traced once per bucket): the greedy next tokens into `tokens`,
    returns the logits (rows, vocab)."""
    n = tg.length()  # the true batch; tokens.shape[0] is the bucket
    rows, d = tokens.shape[0], params.emb.shape[1]
    x = tg.empty((rows, d), np.float32)
    embed[grid_1d(rows * d)](tokens, pos, params.emb, params.wpe, x)
    for layer, p in enumerate(params.layers):
        x = decoder_layer(x, p, pos, n, k_cache[layer], v_cache[layer])
    h = ops.layer_norm(x, params.lnf_w, params.lnf_b, EPS)
    logits = ops.linear(h, params.emb, transpose_w=True)  # tied: h @ emb.T
    ops.argmax(logits, axis=-1, out=tokens)
    return logits


decode_step = tg.compile(dynamic={"tokens": 0, "pos": "value"}, buckets=BUCKETS)(decode_body)


def bucket_of(batch: int) -> int:
    return next(b for b in BUCKETS if b >= batch)


# ---------------------------------------------------------------------------
# the NumPy reference (float64)

def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + EPS) * w + b


def _gelu(z: np.ndarray) -> np.ndarray:
    return 0.5 * z * (1.0 + np.tanh(0.7978845608028654 * (z + 0.044715 * z ** 3)))


class Reference:
    """The same model in NumPy float64, with its own KV cache for `batch` sequences."""

    def __init__(self, params: Params, cfg: Config, batch: int):
        self.p = params_map(lambda a: a.astype(np.float64), params)
        self.cfg = cfg
        dh = cfg.d_model // cfg.heads
        shape = (batch, cfg.layers, cfg.heads, cfg.max_len, dh)
        self.k, self.v = np.zeros(shape), np.zeros(shape)

    def step(self, tokens: np.ndarray, pos: int) -> np.ndarray:
        """The logits (batch, vocab) of one step."""
        p, (n,) = self.p, tokens.shape
        heads, dh = self.cfg.heads, self.cfg.d_model // self.cfg.heads
        x = p.emb[tokens] + p.wpe[pos]
        for layer, w in enumerate(p.layers):
            h = _layer_norm(x, w.ln1_w, w.ln1_b)
            q, k, v = np.split(h @ w.wqkv + w.bqkv, 3, axis=1)
            self.k[:, layer, :, pos] = k.reshape(n, heads, dh)
            self.v[:, layer, :, pos] = v.reshape(n, heads, dh)
            keys, values = self.k[:, layer, :, :pos + 1], self.v[:, layer, :, :pos + 1]
            s = np.einsum("nhe,nhte->nht", q.reshape(n, heads, dh), keys) / math.sqrt(dh)
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            context = np.einsum("nht,nhte->nhe", s, values).reshape(n, -1)
            x = x + context @ w.wo + w.bo
            x = x + _gelu(_layer_norm(x, w.ln2_w, w.ln2_b) @ w.w1 + w.b1) @ w.w2 + w.b2
        return _layer_norm(x, p.lnf_w, p.lnf_b) @ p.emb.T


def check_tokens(name: str, got: np.ndarray, want_logits: np.ndarray,
                 tie: float = 1e-3) -> int:
    """Assert `got` is the argmax of the reference logits; a row whose top two logits are
    closer than `tie` may take either (float32 vs float64 rounding). Returns such rows."""
    want = want_logits.argmax(-1)
    differ = np.flatnonzero(got != want)
    rows = np.arange(len(got))
    gap = want_logits[rows, want] - want_logits[rows, got.clip(0, want_logits.shape[1] - 1)]
    bad = [int(i) for i in differ if not (0 <= got[i] < want_logits.shape[1] and gap[i] < tie)]
    assert not bad, f"{name}: tokens {got[bad]} where the reference picks {want[bad]}"
    return len(differ)


def generate(cfg: Config, params: Params, d_params: Params, cache: tuple[Any, Any],
             batch: int, steps: int, seed: int) -> int:
    """One request: `batch` sequences from random first tokens, `steps` greedy decode
    steps through decode_step (one graph replay each), each step's tokens and logits
    checked against the reference. Returns the near ties that were let through."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, cfg.vocab, batch).astype(np.int32)
    d_tokens = cuda.to_device(tokens)
    ref = Reference(params, cfg, batch)
    ties = 0
    for pos in range(steps):
        want = ref.step(tokens, pos)
        logits = decode_step(d_tokens, pos, *cache, d_params)
        name = f"batch {batch} (bucket {bucket_of(batch)}) step {pos}"
        _support.check(f"{name} logits", logits, want, rtol=1e-4, atol=1e-4,
                       quiet=pos != steps - 1)
        tokens = d_tokens.copy_to_host()
        ties += check_tokens(name, tokens, want)
    print(f"PASS batch {batch}: {steps} steps of greedy tokens equal the reference's "
          f"(last tokens {tokens.tolist()})")
    return ties


def main(small: bool | None = None) -> dict:
    """Run the example; `small` (the default without a GPU) uses simulator-sized inputs.
    Returns what it checked (and, on a GPU at full size, the benchmark's numbers)."""
    small = not _support.GPU if small is None else small
    if small:
        cfg = Config(vocab=32, d_model=16, heads=2, layers=2, d_ff=32, max_len=8)
        batches, steps = [1, 3, 8, 5], 4  # 3 and 5 are no bucket; 5 reuses bucket 8's graph
    else:
        cfg = Config(vocab=2048, d_model=256, heads=8, layers=4, d_ff=1024, max_len=128)
        batches, steps = [1, 8, 37, 64, 5], 16
    print(f"decode_step on the {_support.where()}: {cfg}")
    params = init_params(cfg)
    d_params = params_map(cuda.to_device, params)
    cache = new_cache(cfg, bucket_of(max(batches)))
    ties = 0
    for k, batch in enumerate(batches):
        ties += generate(cfg, params, d_params, cache, batch, steps, seed=100 + k)
    info = decode_step.cache_info()
    buckets = sorted({bucket_of(b) for b in batches})
    print(f"  {len(batches)} requests x {steps} steps = {len(batches) * steps} calls: "
          f"{info.graphs} graphs (buckets {buckets}), {len(decode_step.latest.plan.nodes)} "
          f"nodes each; {ties} near ties let through")
    assert info.graphs == len(buckets) and sorted(info.misses) == buckets
    assert sum(info.hits.values()) == len(batches) * steps - len(buckets)
    out: dict = {"graphs": info.graphs, "buckets": buckets, "calls": len(batches) * steps,
                 "nodes": len(decode_step.latest.plan.nodes), "near_ties": ties}
    if _support.GPU and not small:
        out["benchmark"] = benchmark(cfg, params)
    return out


# ---------------------------------------------------------------------------
# GPU only: tokens/s of tracegraph, eager Numba, PyTorch eager and torch.cuda.graph

class EagerDecode:
    """The eager Numba baseline: the nodes of decode_step's graph for one bucket (the same
    kernels, launch sizes and memory), launched one at a time by Numba on every step, with
    this step's pos and batch passed where the graph patches them. Like
    `_support.EagerPlan`, for a dynamic function. `tokens` must be bucket-sized (the real
    rows first); `step` is the compiled step (decode_step by default)."""

    def __init__(self, tokens: Any, k_cache: Any, v_cache: Any, params: Params,
                 step: Any = None):
        from tracegraph import pytree
        from tracegraph.ir import DEVICE_INPUT, EXTERNAL, View
        from tracegraph.ir.ops import ScalarArg
        from tracegraph.plan import input_bases, replay_table
        from tracegraph.signature import arguments

        plan = (step or decode_step).lower(tokens, 0, k_cache, v_cache, params)
        leaves, _, _ = pytree.flatten((tokens, 0, k_cache, v_cache, params))
        infos = [arguments.describe(a) for a in leaves]
        for inp in plan.inputs:  # the plan's leaves are these leaves (then the length)
            if inp.kind == "array":
                assert tuple(inp.shape) == infos[inp.index].shape, (inp.path, inp.shape)
        self._scalars = {i.index: i.path for i in plan.inputs if i.kind == "scalar"}
        assert sorted(self._scalars.values()) == ["<length>", "pos"], self._scalars
        self.values = {"pos": 0, "<length>": tokens.shape[0]}
        device_bases, _ = input_bases(replay_table(plan), infos + [None])
        self._keep: list[Any] = []
        base: dict[int, int] = {}
        for b in plan.buffers:
            if b.kind == DEVICE_INPUT:
                base[b.id] = device_bases[b.id]
            elif b.kind == EXTERNAL:
                base[b.id] = arguments.describe(b.external).extent[0]
            else:
                mem = _device_bytes(max(b.nbytes, 1))
                self._keep.append(mem)
                base[b.id] = _address(mem)

        def arr(v: View) -> Any:
            return _device_view(base[v.buffer] + v.offset, v.shape, v.strides, v.dtype)

        def arg(a: Any) -> Any:
            if isinstance(a, View):
                return arr(a)
            if isinstance(a, ScalarArg):
                return a  # pos or the batch: filled in per step
            if isinstance(a, tuple):
                return tuple(arg(x) for x in a)
            return a

        def as_bytes(v: View, nbytes: int) -> Any:
            return _device_view(base[v.buffer] + v.offset, (nbytes,), (1,), np.dtype(np.uint8))

        self._steps: list[tuple[Any, tuple, tuple[int, ...]]] = []
        for node in plan.nodes:
            op = node.op
            if node.kind == "kernel":
                # configured at each launch, as eager code does (the simulator's kernel[...]
                # configures the kernel object itself: a second launcher of one kernel
                # would change the first's grid)
                launcher = functools.partial(_launch, op.data.kernel, (
                    op.data.griddim, op.data.blockdim, 0, op.data.sharedmem))
                args = tuple(arg(a) for a in op.data.args)
                dynamic = tuple(k for k, a in enumerate(args) if isinstance(a, ScalarArg))
                self._steps.append((launcher, args, dynamic))
            elif node.kind == "memset":
                blocks = max(1, min(1024, -(-node.nbytes // 256)))
                self._steps.append((_memset_bytes[blocks, 256],
                                    (as_bytes(op.data.dst, node.nbytes), op.data.value), ()))
            elif node.kind == "memcpy":
                blocks = max(1, min(1024, -(-node.nbytes // 256)))
                self._steps.append((_copy_bytes[blocks, 256],
                                    (as_bytes(op.data.dst, node.nbytes),
                                     as_bytes(op.data.src, node.nbytes)), ()))
            elif node.kind == "library":  # cuBLAS, enqueued on the default stream
                call = op.data
                self._steps.append((functools.partial(call.fn, _DEFAULT_STREAM),
                                    tuple(arg(a) for a in call.args), ()))
            else:
                raise ValueError(f"EagerDecode does not run {node.kind} nodes")
        self.launches = len(self._steps)
        self.logits = arr(plan.outputs[0].view)

    def run(self, pos: int, n: int) -> None:
        """One step at position pos for the first n rows."""
        values = {leaf: (pos if path == "pos" else n) for leaf, path in self._scalars.items()}
        for launcher, args, dynamic in self._steps:
            if dynamic:
                args = tuple(values[a.leaf] if k in dynamic else a for k, a in enumerate(args))
            launcher(*args)


def _launch(kernel: Any, config: tuple, *args: Any) -> None:
    kernel[config](*args)


@cuda.jit
def _memset_bytes(buf, value):
    for i in range(cuda.grid(1), buf.size, cuda.gridsize(1)):
        buf[i] = value


@cuda.jit
def _copy_bytes(dst, src):
    for i in range(cuda.grid(1), dst.size, cuda.gridsize(1)):
        dst[i] = src[i]


class _DefaultStream:
    """What a tg.library function is given, for the legacy default stream Numba uses."""
    handle = 0


_DEFAULT_STREAM = _DefaultStream()


def _device_bytes(nbytes: int) -> Any:
    if _support.GPU:
        return cuda.device_array(nbytes, np.uint8)
    return np.zeros(nbytes, np.uint8)  # the simulator's device memory is host memory


def _address(mem: Any) -> int:
    if _support.GPU:
        return mem.__cuda_array_interface__["data"][0]
    return mem.ctypes.data


def _device_view(address: int, shape: tuple, strides: tuple, dtype: np.dtype) -> Any:
    """An array over device memory at `address` (no copy)."""
    if _support.GPU:
        desc = {"shape": tuple(shape), "strides": tuple(strides), "typestr": dtype.str,
                "data": (address, False), "version": 3}
        return cuda.from_cuda_array_interface(desc, owner=None, sync=False)
    # the simulator (to check this baseline without a GPU): host memory at that address
    import ctypes

    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    span = sum((n - 1) * s for n, s in zip(shape, strides)) + dtype.itemsize if all(shape) else 0
    raw = np.ctypeslib.as_array((ctypes.c_uint8 * max(span, 1)).from_address(address))
    return FakeCUDAArray(np.ndarray(shape, dtype, buffer=raw, strides=strides))


# -- the same model in PyTorch -------------------------------------------------

def torch_params(params: Params, device: str) -> Params:
    import torch
    return params_map(lambda a: torch.as_tensor(a, device=device), params)


def torch_step(tp: Params, tokens: Any, pos: Any, k_cache: Any, v_cache: Any) -> Any:
    """One decode step in PyTorch, on `tokens.shape[0]` rows: the greedy tokens into
    `tokens` in place, returns the logits. `pos` is a Python int (eager: attention over
    the cache's first pos+1 positions) or a 1-element int64 tensor (CUDA-graph capture:
    static shapes, attention over every position with the later ones masked out).
    No host synchronization either way."""
    import torch
    import torch.nn.functional as F

    rows = tokens.shape[0]
    heads, max_len, dh = k_cache.shape[2], k_cache.shape[3], k_cache.shape[4]
    d = heads * dh
    static = isinstance(pos, torch.Tensor)
    if static:
        later = torch.arange(max_len, device=tokens.device) > pos  # (max_len,)
        x = tp.emb[tokens.long()] + tp.wpe[pos]                     # (rows, d) + (1, d)
    else:
        x = tp.emb[tokens.long()] + tp.wpe[pos]
    for layer, p in enumerate(tp.layers):
        h = F.layer_norm(x, (d,), p.ln1_w, p.ln1_b, EPS)
        q, k, v = torch.addmm(p.bqkv, h, p.wqkv).split(d, dim=1)
        q = q.reshape(rows, heads, 1, dh)
        kc, vc = k_cache[layer, :rows], v_cache[layer, :rows]       # (rows, heads, T, dh)
        if static:
            kc.index_copy_(2, pos, k.reshape(rows, heads, 1, dh))
            vc.index_copy_(2, pos, v.reshape(rows, heads, 1, dh))
            keys, values = kc, vc
        else:
            kc[:, :, pos] = k.reshape(rows, heads, dh)
            vc[:, :, pos] = v.reshape(rows, heads, dh)
            keys, values = kc[:, :, :pos + 1], vc[:, :, :pos + 1]
        s = (q @ keys.transpose(-1, -2)) * dh ** -0.5               # (rows, heads, 1, t)
        if static:
            s = s.masked_fill(later, float("-inf"))
        context = (torch.softmax(s, dim=-1) @ values).reshape(rows, d)
        x = x + torch.addmm(p.bo, context, p.wo)
        h = F.layer_norm(x, (d,), p.ln2_w, p.ln2_b, EPS)
        x = x + torch.addmm(p.b2, F.gelu(torch.addmm(p.b1, h, p.w1), approximate="tanh"), p.w2)
    logits = F.layer_norm(x, (d,), tp.lnf_w, tp.lnf_b, EPS) @ tp.emb.T
    tokens.copy_(logits.argmax(dim=-1))  # int64 -> the int32 tokens
    return logits


class TorchGraphs:
    """torch.cuda.graph: one captured decode step per bucket, over static buffers: the
    bucket's tokens (a batch of n uses rows 0..n-1, the rest padding, as tracegraph pads)
    and a 1-element position tensor set before each replay."""

    def __init__(self, tp: Params, k_cache: Any, v_cache: Any, buckets: list[int]):
        import torch
        self.graphs: dict[int, Any] = {}
        self.tokens: dict[int, Any] = {}
        self.logits: dict[int, Any] = {}
        self.pos = torch.zeros(1, dtype=torch.int64, device="cuda")
        for b in buckets:
            tokens = torch.zeros(b, dtype=torch.int32, device="cuda")
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm up before capture, as PyTorch asks
                for _ in range(3):
                    torch_step(tp, tokens, self.pos, k_cache, v_cache)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self.logits[b] = torch_step(tp, tokens, self.pos, k_cache, v_cache)
            self.graphs[b], self.tokens[b] = graph, tokens
        torch.cuda.synchronize()

    def start(self, tokens: Any) -> int:
        """A new request: its first tokens into the bucket's static buffer; the bucket."""
        n = tokens.shape[0]
        b = bucket_of(n)
        self.tokens[b].zero_()
        self.tokens[b][:n].copy_(tokens)
        return b

    def step(self, b: int, pos: int) -> None:
        self.pos.fill_(pos)
        self.graphs[b].replay()


def _sync() -> None:
    cuda.synchronize()
    try:
        import torch
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    except ImportError:
        pass


def _median_generation(step: Callable[[int], Any], steps: int, repeats: int) -> float:
    """Median seconds of `steps` decode steps (pos 0..steps-1), after one warm-up run;
    each run is timed from a synchronized device to a synchronized device."""
    for pos in range(steps):
        step(pos)
    _sync()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for pos in range(steps):
            step(pos)
        _sync()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def benchmark(cfg: Config, params: Params, batches: tuple[int, ...] = (1, 8, 37, 64),
              steps: int = 64, repeats: int = 5) -> dict:
    """GPU only: tokens/s (batch * steps / median time of `steps` steps) per contender and
    batch; prints a table, returns {contender: {batch: tokens/s}}."""
    if not _support.GPU:
        return {}
    try:
        import torch
        have_torch = torch.cuda.is_available()
    except ImportError:
        have_torch = False
    print(f"decode benchmark: {steps} steps per request, median of {repeats} requests, "
          f"batches {list(batches)}, buckets {BUCKETS}")
    d_params = params_map(cuda.to_device, params)
    slots = bucket_of(max(batches))
    k_cache, v_cache = new_cache(cfg, slots)
    rng = np.random.default_rng(7)
    first = {b: rng.integers(0, cfg.vocab, b).astype(np.int32) for b in batches}
    results: dict[str, dict[int, float]] = {}
    agree: dict[str, dict[int, bool]] = {}

    def record(name: str, batch: int, seconds: float, tokens_after: np.ndarray) -> None:
        results.setdefault(name, {})[batch] = batch * steps / seconds
        agree.setdefault(name, {})[batch] = bool(np.array_equal(tokens_after, want[batch]))

    # tracegraph: compile every bucket first (largest first), then one replay per step
    decode_step.warmup(cuda.to_device(first[batches[0]]), 0, k_cache, v_cache, d_params)
    want: dict[int, np.ndarray] = {}
    for batch in batches:
        d_tokens = cuda.to_device(first[batch])

        def tg_step(pos: int) -> None:
            decode_step(d_tokens, pos, k_cache, v_cache, d_params)
        d_tokens.copy_to_device(first[batch])
        seconds = _median_generation(tg_step, steps, repeats)
        d_tokens.copy_to_device(first[batch])  # one more request, for the tokens it makes
        for pos in range(steps):
            tg_step(pos)
        want[batch] = d_tokens.copy_to_host()
        record("tracegraph (buckets)", batch, seconds, want[batch])

    # eager Numba: the same nodes, launched one by one, at the bucket's size
    for batch in batches:
        b = bucket_of(batch)
        tokens = np.zeros(b, np.int32)
        tokens[:batch] = first[batch]
        d_tokens = cuda.to_device(tokens)
        eager = EagerDecode(d_tokens, k_cache, v_cache, d_params)
        seconds = _median_generation(lambda pos: eager.run(pos, batch), steps, repeats)
        d_tokens.copy_to_device(tokens)
        for pos in range(steps):
            eager.run(pos, batch)
        record("eager Numba (the graph's nodes)", batch, seconds,
               d_tokens.copy_to_host()[:batch])

    if have_torch:
        tp = torch_params(params, "cuda")
        tk = torch.as_tensor(k_cache, device="cuda")  # the same cache memory, zero-copy
        tv = torch.as_tensor(v_cache, device="cuda")
        with torch.inference_mode():
            for batch in batches:
                tokens = torch.as_tensor(first[batch], device="cuda")

                def torch_eager(pos: int) -> None:
                    torch_step(tp, tokens, pos, tk, tv)
                seconds = _median_generation(torch_eager, steps, repeats)
                tokens.copy_(torch.as_tensor(first[batch], device="cuda"))
                for pos in range(steps):
                    torch_eager(pos)
                record("PyTorch eager", batch, seconds, tokens.cpu().numpy())

            graphs = TorchGraphs(tp, tk, tv, sorted({bucket_of(b) for b in batches}))
            for batch in batches:
                first_t = torch.as_tensor(first[batch], device="cuda")
                b = graphs.start(first_t)
                seconds = _median_generation(lambda pos: graphs.step(b, pos), steps, repeats)
                graphs.start(first_t)
                for pos in range(steps):
                    graphs.step(b, pos)
                record("torch.cuda.graph (buckets)", batch, seconds,
                       graphs.tokens[b][:batch].cpu().numpy())
    else:
        print("  (PyTorch with CUDA not importable: its rows are skipped)")

    width = max(len(name) for name in results)
    print(f"  {'tokens/s':<{width}} " + " ".join(f"{'batch ' + str(b):>14}" for b in batches))
    for name, row in results.items():
        cells = " ".join(f"{row[b]:>13,.0f}{'' if agree[name][b] else '*'}" for b in batches)
        print(f"  {name:<{width}} {cells}")
    if not all(all(row.values()) for row in agree.values()):
        print("  * its tokens after the request differ from tracegraph's (near ties in float32,"
              " or a bug)")
    return {"tokens_per_s": results, "same_tokens_as_tracegraph": agree}


if __name__ == "__main__":
    main()
