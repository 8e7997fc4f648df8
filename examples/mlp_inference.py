"""A 3-layer MLP forward pass written with tracegraph.ops: one graph per batch size, and
then a batch that varies from call to call through buckets (one graph per bucket).

    h1 = relu(x @ w1 + b1);  h2 = relu(h1 @ w2 + b2);  probs = softmax(h2 @ w3 + b3)

`x @ w1` is a tiled matmul kernel, `+ b1` a broadcast add kernel, `relu` and
`softmax` one kernel each: 9 launches that the graph replays as one.

    python examples/mlp_inference.py
"""
from __future__ import annotations

import itertools

import _support  # first: picks the GPU, or Numba's simulator before Numba loads
import numpy as np

import tracegraph as tg
from tracegraph import ops


@tg.compile
def mlp(x, w1, b1, w2, b2, w3, b3):
    h = ops.relu(x @ w1 + b1)
    h = ops.relu(h @ w2 + b2)
    return ops.softmax(h @ w3 + b3)


BUCKETS = (1, 2, 4, 8, 16, 32, 64)


@tg.compile(dynamic={"x": 0}, buckets=BUCKETS)
def mlp_any_batch(x, w1, b1, w2, b2, w3, b3):
    """The same MLP for any batch up to 64: padded to the next bucket (rows are
    independent, so padding rows change no real row), results cut back to the batch."""
    h = ops.relu(x @ w1 + b1)
    h = ops.relu(h @ w2 + b2)
    return ops.softmax(h @ w3 + b3)


def batch_sweep(sizes: list[int], params: list[np.ndarray], top: int) -> int:
    """Every batch 1..top through the buckets; returns the number of graphs used."""
    d_params = _support.device(*params)
    rng = np.random.default_rng(2)
    for batch in range(1, top + 1):
        x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
        (d_x,) = _support.device(x)
        probs = mlp_any_batch(d_x, *d_params)
        _support.check(f"mlp batch={batch} in bucket {mlp_any_batch.latest.bucket}", probs,
                       reference(x.astype(np.float64), params), rtol=1e-4, atol=1e-5,
                       quiet=batch not in (1, top))
    graphs = mlp_any_batch.cache_info().graphs
    print(f"batches 1..{top}: {graphs} graphs (buckets {BUCKETS[:graphs]})")
    return graphs


def init_params(sizes: list[int], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in itertools.pairwise(sizes):
        params.append((rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32))
        params.append((0.1 * rng.standard_normal(fan_out)).astype(np.float32))
    return params


def reference(x: np.ndarray, params: list[np.ndarray]) -> np.ndarray:
    w1, b1, w2, b2, w3, b3 = (p.astype(np.float64) for p in params)
    h = np.maximum(x @ w1 + b1, 0)
    h = np.maximum(h @ w2 + b2, 0)
    logits = h @ w3 + b3
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def main(small: bool | None = None) -> None:
    """Run the example; `small` (the default without a GPU) uses simulator-sized inputs."""
    small = not _support.GPU if small is None else small
    if small:
        sizes, batches = [12, 16, 16, 5], [1, 3]
    else:
        sizes, batches = [256, 512, 512, 10], [1, 8, 64]
    print(f"mlp_inference on the {_support.where()}: layers {sizes}")
    params = init_params(sizes)
    d_params = _support.device(*params)
    rng = np.random.default_rng(1)
    for batch in batches:
        x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
        (d_x,) = _support.device(x)
        probs = mlp(d_x, *d_params)  # first call for this shape: trace, compile, launch
        _support.check(f"mlp batch={batch}", probs, reference(x.astype(np.float64), params),
                       rtol=1e-4, atol=1e-5)
        x2 = rng.standard_normal((batch, sizes[0])).astype(np.float32)
        (d_x2,) = _support.device(x2)
        _support.check(f"mlp batch={batch} replayed with new input", mlp.replay(d_x2, *d_params),
                       reference(x2.astype(np.float64), params), rtol=1e-4, atol=1e-5)
        _support.report_timing(f"batch {batch:3d}", mlp, (d_x, *d_params))
    top = 8 if small else 64
    assert batch_sweep(sizes, params, top) == BUCKETS.index(top) + 1


if __name__ == "__main__":
    main()
