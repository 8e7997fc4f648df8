"""A 3-layer MLP forward pass written with tracegraph.ops: one graph per batch size.

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


if __name__ == "__main__":
    main()
