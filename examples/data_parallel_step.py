"""A data-parallel training step: every rank computes the gradient of a least-squares
linear model on its own shard of the batch, the ranks average their gradients with
tg.allreduce (a captured NCCL node on GPUs), and every rank applies the same SGD update.

One compiled step per rank, one graph:

    r = X_rank @ w - y_rank                  (kernel residual)
    g = X_rank^T r / rows                    (kernel gradient)
    tg.allreduce(g, op="avg", comm=comm)     (the collective, ordered only by g)
    w -= lr * g                              (kernel sgd)

Equal shards make the average of the ranks' gradients the full batch's gradient, so
every rank's weights must equal a single-process NumPy run on the whole batch.

    python examples/data_parallel_step.py                  2 simulated ranks in threads
                                                           (backend="sim"); on a GPU
                                                           also 1 NCCL rank on the cuda
                                                           backend
    torchrun --nproc-per-node=2 examples/data_parallel_step.py   one NCCL rank per GPU
                                                           (not yet run on several
                                                           GPUs)
"""
from __future__ import annotations

import os
import threading
from typing import Any

import _support  # first: picks the GPU, or Numba's simulator before Numba loads
import numpy as np
from numba import cuda

import tracegraph as tg

LR = 0.1
THREADS = 64 if _support.GPU else 8


@cuda.jit
def residual(x, w, y, r):
    """r = x @ w - y, one thread per row."""
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        acc = -y[i]
        for j in range(x.shape[1]):
            acc += x[i, j] * w[j]
        r[i] = acc


@cuda.jit
def gradient(x, r, g):
    """g = x^T r / rows, one thread per feature."""
    for j in range(cuda.grid(1), x.shape[1], cuda.gridsize(1)):
        acc = 0.0
        for i in range(x.shape[0]):
            acc += x[i, j] * r[i]
        g[j] = acc / x.shape[0]


@cuda.jit
def sgd(w, g, lr):
    for j in range(cuda.grid(1), w.size, cuda.gridsize(1)):
        w[j] -= lr * g[j]


def step_body(x, y, w, comm):
    """One step on this rank's shard: the weights `w` are updated in place."""
    r = tg.empty(x.shape[0], x.dtype)
    g = tg.empty(w.shape[0], w.dtype)
    residual[1, THREADS](x, w, y, r)
    gradient[1, THREADS](x, r, g)
    tg.allreduce(g, op="avg", comm=comm)
    sgd[1, THREADS](w, g, LR)
    return w


def problem(rows: int, features: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, features))
    y = x @ rng.standard_normal(features) + 0.01 * rng.standard_normal(rows)
    return x, y


def reference(x: np.ndarray, y: np.ndarray, steps: int) -> np.ndarray:
    """Full-batch gradient descent in NumPy."""
    w = np.zeros(x.shape[1])
    for _ in range(steps):
        w -= LR * (x.T @ (x @ w - y)) / x.shape[0]
    return w


def shards(rows: int, world: int) -> list[np.ndarray]:
    """Equal shards: only then is the average of the ranks' gradients the full batch's."""
    if rows % world:
        raise ValueError(f"{rows} rows do not split into {world} equal shards")
    return np.split(np.arange(rows), world)


def simulated_ranks(world: int, x: np.ndarray, y: np.ndarray, steps: int) -> list:
    """`world` ranks in threads of this process (tg.sim_group), each on its shard."""
    step = tg.compile(step_body, backend="sim")
    comms = tg.sim_group(world)
    parts = shards(x.shape[0], world)
    weights: list[Any] = [None] * world
    errors: list[BaseException] = []

    def rank(k: int) -> None:
        try:
            w = np.zeros(x.shape[1])
            xs, ys = x[parts[k]], y[parts[k]]
            for _ in range(steps):
                w = step(xs, ys, w, comms[k])
            weights[k] = w
        except BaseException as exc:
            errors.append(exc)
    threads = [threading.Thread(target=rank, args=(k,)) for k in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return weights


def nccl_rank(x: np.ndarray, y: np.ndarray, steps: int, comm: Any) -> np.ndarray:
    """This process's rank on its GPU, its shard as device arrays, comm=None for one."""
    world = 1 if comm is None else comm.world_size
    me = 0 if comm is None else comm.rank
    shard = shards(x.shape[0], world)[me]
    step = tg.compile(step_body, backend="cuda")
    xs, ys = cuda.to_device(x[shard]), cuda.to_device(y[shard])
    w = cuda.to_device(np.zeros(x.shape[1]))
    for _ in range(steps):
        step(xs, ys, w, comm)
    return w.copy_to_host()


def main(small: bool | None = None) -> dict:
    small = not _support.GPU if small is None else small
    rows, features, steps = (16, 4, 5) if small else (4096, 64, 50)
    x, y = problem(rows, features)
    want = reference(x, y, steps)
    out: dict = {}
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # torchrun: one NCCL rank per process
        comm = tg.Communicator.from_env()
        got = nccl_rank(x, y, steps, comm)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
        print(f"PASS rank {comm.rank} of {comm.world_size}: weights equal the full-batch "
              "reference")
        return {"rank": comm.rank, "world": comm.world_size}
    print(f"data_parallel_step on the {_support.where()}: {rows} rows, {features} features, "
          f"{steps} steps")
    for world in (2, 4):
        weights = simulated_ranks(world, x, y, steps)
        for k, w in enumerate(weights):
            np.testing.assert_allclose(w, want, rtol=1e-9, atol=1e-12,
                                       err_msg=f"simulated rank {k} of {world}")
        print(f"PASS {world} simulated ranks: every rank's weights equal the full-batch "
              "reference")
        out[f"simulated_{world}"] = True
    if _support.GPU:
        got = nccl_rank(x, y, steps, None)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
        print("PASS 1 NCCL rank on the cuda backend: weights equal the full-batch reference")
        out["nccl_1"] = True
    return out


if __name__ == "__main__":
    main()
