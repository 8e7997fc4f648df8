"""An RL rollout that runs ON THE DEVICE until every episode of a batch is done: one graph
launch per rollout, however long the episodes last.

    count_running[1, threads](done, flag)               # flag = episodes still running
    with tg.while_(flag, max_iterations=limit) as loop:
        corridor_step[blocks, threads](policy, pos, rng, steps, ret, done, length, horizon)
        count_running[1, threads](done, flag)

The environments are slippery corridors (a random walk with a drift): an agent at cell
`pos` in 0..length picks a move from a fixed deterministic policy table; with some chance
the floor slips it the other way or holds it in place (each environment has its own
xorshift32 generator). Every step costs 1; reaching the goal cell `length` earns 20,
falling into the pit at cell 0 costs 20; an episode also ends (truncated) after `horizon`
steps. A finished environment stays finished while the others go on. All arithmetic is on
integers, so every backend gives exactly NumPy's answer: the loop's iteration count (the
longest episode), and per environment the position, generator state, episode length,
return and how it ended.

On a GPU it also times the rollout for several horizons against the host-driven loop a
graph without device-side control flow needs: replay a graph of k steps, copy the flag back,
check it on the host, repeat (k = 1 and k = 10; steps after every episode ended change
nothing, so both give the same results).

    python examples/rl_rollout.py
"""
from __future__ import annotations

import statistics
import time

import _support  # first: picks the GPU, or Numba's simulator before Numba loads
import numpy as np
from numba import cuda, int32

import tracegraph as tg

RUNNING, GOAL, PIT, TRUNCATED = 0, 1, 2, 3
SLIP, STAY = 30, 15            # percent: moved the other way / held in place
STEP_COST, GOAL_REWARD, PIT_COST = 1, 20, 20
MASK = 0xFFFFFFFF
COUNT_THREADS = 1024 if _support.GPU else 16  # one block counts the running episodes


@cuda.jit
def corridor_step(policy, pos, rng, steps, ret, done, length, horizon):
    """One step of every running environment (grid-stride); finished ones are left alone."""
    for i in range(cuda.grid(1), pos.size, cuda.gridsize(1)):
        if done[i] != RUNNING:
            continue
        x = rng[i]                                   # xorshift32, kept in an int64
        x = (x ^ (x << 13)) & MASK
        x = x ^ (x >> 17)
        x = (x ^ (x << 5)) & MASK
        rng[i] = x
        p = pos[i]
        action = policy[p]
        roll = x % 100
        if roll < SLIP:
            p -= action
        elif roll >= SLIP + STAY:
            p += action
        pos[i] = p
        steps[i] += 1
        ret[i] -= STEP_COST
        if p >= length:
            done[i] = GOAL
            ret[i] += GOAL_REWARD
        elif p <= 0:
            done[i] = PIT
            ret[i] -= PIT_COST
        elif steps[i] >= horizon:
            done[i] = TRUNCATED


@cuda.jit
def count_running(done, flag):
    """flag[0] = how many episodes are still running (one block of COUNT_THREADS)."""
    part = cuda.shared.array(COUNT_THREADS, int32)
    t = cuda.threadIdx.x
    count = 0
    for i in range(t, done.size, cuda.blockDim.x):
        if done[i] == RUNNING:
            count += 1
    part[t] = count
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            part[t] += part[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        flag[0] = part[0]


def _launch(envs: int) -> tuple[int, int]:
    threads = 256 if _support.GPU else 8
    return max(1, min(-(-envs // threads), 1024 if _support.GPU else 2)), threads


def make_rollout(limit: int, raise_at_limit: bool = False):
    """rollout(...): step every environment until all episodes are done (or `limit` steps);
    the caller's arrays are updated in place; returns the number of steps."""
    @tg.compile
    def rollout(policy, pos, rng, steps, ret, done, length, horizon):
        blocks, threads = _launch(pos.size)
        flag = tg.zeros(1, np.int32)
        count_running[1, COUNT_THREADS](done, flag)
        with tg.while_(flag, max_iterations=limit, raise_at_limit=raise_at_limit) as loop:
            corridor_step[blocks, threads](policy, pos, rng, steps, ret, done, length, horizon)
            count_running[1, COUNT_THREADS](done, flag)
        return loop.iterations
    return rollout


@tg.compile
def advance(policy, pos, rng, steps, ret, done, flag, length, horizon, k):
    """The host-driven baseline's graph: k steps, no device-side control flow."""
    blocks, threads = _launch(pos.size)
    for _ in range(k):
        corridor_step[blocks, threads](policy, pos, rng, steps, ret, done, length, horizon)
        count_running[1, COUNT_THREADS](done, flag)
    return flag


def host_driven(arrays: list, flag, length: int, horizon: int, k: int, limit: int) -> int:
    """Replay k steps, copy the running count back, check it on the host; repeat."""
    done = 0
    running = np.ones(1, np.int32)
    while done < limit:
        advance.replay(*arrays, flag, length, horizon, k)
        done += k
        flag.copy_to_host(running)           # waits for the graph
        if running[0] == 0:
            break
    return done


def environments(envs: int, length: int) -> list[np.ndarray]:
    """The fixed policy and the initial state: [policy, pos, rng, steps, ret, done]."""
    cells = np.arange(length + 1)
    policy = np.where(cells % 7 == 3, -1, 1).astype(np.int32)  # right, except at 3, 10, ...
    rng0 = np.random.default_rng(0)
    pos = rng0.integers(1, length, envs).astype(np.int32)
    rng = ((np.arange(envs, dtype=np.int64) * 2654435761 + 12345) & MASK) | 1
    zeros = np.zeros(envs, np.int32)
    return [policy, pos, rng, zeros.copy(), zeros.copy(), zeros.copy()]


def reference(arrays: list[np.ndarray], length: int, horizon: int,
              limit: int) -> tuple[list[np.ndarray], int]:
    """The same rollout in NumPy, one step at a time: (final arrays, steps taken)."""
    policy, pos, rng, steps, ret, done = (a.copy() for a in arrays)
    it = 0
    while (done == RUNNING).any() and it < limit:
        live = done == RUNNING
        x = rng[live]
        x = (x ^ (x << 13)) & MASK
        x = x ^ (x >> 17)
        x = (x ^ (x << 5)) & MASK
        rng[live] = x
        action = policy[pos[live]]
        roll = x % 100
        p = pos[live] + np.where(roll < SLIP, -action, np.where(roll >= SLIP + STAY, action, 0))
        pos[live] = p
        steps[live] += 1
        r = ret[live] - STEP_COST
        d = np.full(p.shape, RUNNING, np.int32)
        truncated = steps[live] >= horizon
        d[truncated] = TRUNCATED
        d[p <= 0], r[p <= 0] = PIT, r[p <= 0] - PIT_COST
        d[p >= length], r[p >= length] = GOAL, r[p >= length] + GOAL_REWARD
        ret[live], done[live] = r, d
        it += 1
    return [policy, pos, rng, steps, ret, done], it


NAMES = ("policy", "pos", "rng", "steps", "ret", "done")


def _check(label: str, got: list, want: list[np.ndarray]) -> None:
    for name, g, w in zip(NAMES[1:], got[1:], want[1:]):
        _support.check(f"{label}: {name}", g, w, rtol=0, atol=0, quiet=True)
    print(f"PASS {label}: positions, generators, lengths, returns and ends match NumPy "
          "exactly")


def _time(run, reset, repeats: int) -> float:
    """Median seconds of run() from reset environments (device synchronized)."""
    samples = []
    for _ in range(repeats + 1):
        reset()
        cuda.synchronize()
        t0 = time.perf_counter()
        run()
        cuda.synchronize()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples[1:])  # the first run warms up


def compare(envs: int, length: int, horizons: tuple[int, ...], ks: tuple[int, ...],
            repeats: int) -> list[dict]:
    """Time to the end of every episode: tg.while_ against the host-driven loop."""
    start = environments(envs, length)
    initial = _support.device(*start)
    arrays = _support.device(*start)
    flag = cuda.device_array(1, np.int32)

    def reset() -> None:
        for a, a0 in zip(arrays, initial):
            a.copy_to_device(a0)

    rows = []
    for horizon in horizons:
        limit = horizon + 1
        rollout = make_rollout(limit)
        reset()
        its = int(_support.host(rollout(*arrays, length, horizon))[0])
        want = [_support.host(a) for a in arrays]
        row = {"horizon": horizon, "iterations": its,
               "while_s": _time(lambda f=rollout, h=horizon: f.replay(*arrays, length, h),
                                reset, repeats)}
        for k in ks:
            reset()
            advance(*arrays, flag, length, horizon, k)  # trace and build outside the timing
            reset()
            row[f"host_k{k}_iterations"] = host_driven(arrays, flag, length, horizon, k, limit)
            for name, a, w in zip(NAMES, arrays, want):  # the same results
                assert np.array_equal(_support.host(a), w), f"host loop k={k}: {name} differs"
            row[f"host_k{k}_s"] = _time(
                lambda k=k, h=horizon, n=limit: host_driven(arrays, flag, length, h, k, n),
                reset, repeats)
        rows.append(row)
    return rows


def print_table(envs: int, rows: list[dict], ks: tuple[int, ...]) -> None:
    head = f"  {'horizon':>7} {'steps':>6} {'tg.while_':>11}"
    for k in ks:
        head += f" {f'host k={k}':>12} {'steps':>6} {'x':>6}"
    print(f"  time until every episode is done, {envs} environments "
          "(median, device synchronized):")
    print(head)
    for r in rows:
        line = f"  {r['horizon']:>7} {r['iterations']:>6} {r['while_s'] * 1e3:>8.2f} ms"
        for k in ks:
            t = r[f"host_k{k}_s"]
            line += (f" {t * 1e3:>9.2f} ms {r[f'host_k{k}_iterations']:>6}"
                     f" {t / r['while_s']:>5.1f}x")
        print(line)


def main(small: bool | None = None) -> dict:
    """Run the example; `small` (the default without a GPU) uses simulator-sized inputs.
    Returns the checked step counts and, on a GPU at full size, the timing rows."""
    small = not _support.GPU if small is None else small
    envs, length, horizon = (16, 8, 40) if small else (4096, 40, 1000)
    limit = horizon + 1
    print(f"rl_rollout on the {_support.where()}: {envs} slippery corridors of {length + 1} "
          f"cells, episodes of at most {horizon} steps")
    start = environments(envs, length)
    want, want_it = reference(start, length, horizon, limit)
    rollout = make_rollout(limit)
    arrays = _support.device(*start)
    iterations = int(_support.host(rollout(*arrays, length, horizon))[0])
    assert iterations == want_it == int(want[3].max()), \
        f"the loop ran {iterations} steps, NumPy's rollout {want_it}"
    print(f"PASS the loop ran {iterations} steps, the longest episode's length (NumPy: "
          f"{want_it})")
    _check(f"after {iterations} steps", arrays, want)
    ends = {name: int((want[5] == code).sum())
            for name, code in (("goal", GOAL), ("pit", PIT), ("truncated", TRUNCATED))}
    print(f"  one graph of {len(rollout.latest.plan.nodes)} nodes; episodes: {ends}, "
          f"mean return {want[4].mean():.2f}")
    result: dict = {"envs": envs, "iterations": iterations, "ends": ends}

    arrays = _support.device(*start)         # a replay on fresh environments
    again = int(_support.host(rollout.replay(*arrays, length, horizon))[0])
    assert again == iterations, f"the replay ran {again} steps, not {iterations}"
    _check("replayed on fresh environments", arrays, want)

    short = 4                                # max_iterations stops the rollout early
    arrays = _support.device(*start)
    got = int(_support.host(make_rollout(short)(*arrays, length, horizon))[0])
    assert got == short, f"max_iterations={short}: the loop ran {got} steps"
    _check(f"max_iterations={short}", arrays, reference(start, length, horizon, short)[0])

    if small:                                # the host-driven loop gives the same results
        k, flag = 8, cuda.device_array(1, np.int32)
        advance(*_support.device(*start), flag, length, horizon, k)  # trace and build
        arrays = _support.device(*start)
        ran = host_driven(arrays, flag, length, horizon, k, limit)
        assert ran == -(-iterations // k) * k, f"the host loop ran {ran} steps"
        _check(f"host-driven loop, {k} steps per replay", arrays, want)

    if _support.GPU and not small:
        ks = (1, 10)
        rows = compare(envs, length, (100, 300, 1000), ks, repeats=20)
        print_table(envs, rows, ks)
        result["timing"] = rows
    return result


if __name__ == "__main__":
    main()
