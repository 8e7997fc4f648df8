"""W4: batched RL environment step. 4096 cart-pole environments, a tiny
linear policy; one benchmark step is a rollout of T env steps, each a policy
kernel then a physics kernel (Euler step, reward, reset of finished envs)."""
import math

import numpy as np
from numba import cuda

from benchmarks.common import Bench, Skip, compare, run_bench
from benchmarks.contenders import (
    capture_numba,
    cupy_graph,
    torch_graph,
    tracegraph_bench,
)

ID = "W4"
TITLE = "Batched cart-pole env step + linear policy"
PRIMARY = "step_us"
BASELINE = "numba_eager"

# Classic cart-pole constants (Barto, Sutton & Anderson; as in Gym).
GRAVITY, TOTAL_MASS, LENGTH, POLEMASS_LENGTH, MASSPOLE = 9.8, 1.1, 0.5, 0.05, 0.1
FORCE, TAU, X_LIM, TH_LIM = 10.0, 0.02, 2.4, 0.2095


@cuda.jit
def policy(state, w, action):
    i = cuda.grid(1)
    if i < action.size:
        s = w[4] + state[i, 0] * w[0] + state[i, 1] * w[1] + state[i, 2] * w[2] + state[i, 3] * w[3]
        action[i] = 1.0 if s > 0 else -1.0


@cuda.jit
def physics(state, action, reward, done):
    i = cuda.grid(1)
    if i < action.size:
        x, x_dot, th, th_dot = state[i, 0], state[i, 1], state[i, 2], state[i, 3]
        costh = math.cos(th)
        sinth = math.sin(th)
        temp = (FORCE * action[i] + POLEMASS_LENGTH * th_dot * th_dot * sinth) / TOTAL_MASS
        thacc = (GRAVITY * sinth - costh * temp) / (
            LENGTH * (4.0 / 3.0 - MASSPOLE * costh * costh / TOTAL_MASS))
        xacc = temp - POLEMASS_LENGTH * thacc * costh / TOTAL_MASS
        x = x + TAU * x_dot
        x_dot = x_dot + TAU * xacc
        th = th + TAU * th_dot
        th_dot = th_dot + TAU * thacc
        reward[i] += 1.0
        if x < -X_LIM or x > X_LIM or th < -TH_LIM or th > TH_LIM:
            done[i] += 1.0
            r = 0.01 * ((i % 7) - 3)
            x, x_dot, th, th_dot = r, -r, r, -r
        state[i, 0] = x
        state[i, 1] = x_dot
        state[i, 2] = th
        state[i, 3] = th_dot


CUPY_SRC = r"""
extern "C" __global__ void policy(const float* state, const float* w, float* action, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float* s = state + 4 * i;
    float v = w[4] + s[0] * w[0] + s[1] * w[1] + s[2] * w[2] + s[3] * w[3];
    action[i] = v > 0 ? 1.f : -1.f;
  }
}
extern "C" __global__ void physics(float* state, const float* action, float* reward,
                                   float* done, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float* s = state + 4 * i;
    double x = s[0], x_dot = s[1], th = s[2], th_dot = s[3];
    double costh = cos(th), sinth = sin(th);
    double temp = (10.0 * action[i] + 0.05 * th_dot * th_dot * sinth) / 1.1;
    double thacc = (9.8 * sinth - costh * temp) / (0.5 * (4.0 / 3.0 - 0.1 * costh * costh / 1.1));
    double xacc = temp - 0.05 * thacc * costh / 1.1;
    x += 0.02 * x_dot; x_dot += 0.02 * xacc; th += 0.02 * th_dot; th_dot += 0.02 * thacc;
    reward[i] += 1.f;
    if (x < -2.4 || x > 2.4 || th < -0.2095 || th > 0.2095) {
      done[i] += 1.f;
      double r = 0.01 * ((i % 7) - 3);
      x = r; x_dot = -r; th = r; th_dot = -r;
    }
    s[0] = x; s[1] = x_dot; s[2] = th; s[3] = th_dot;
  }
}
"""


def sizes(cfg):
    if cfg.smoke:
        return {"envs": 4, "horizon": 2, "block": 4}
    return {"envs": 4096, "horizon": 16, "block": 256}


def initial(envs, seed=0):
    rng = np.random.default_rng(seed)
    state = rng.uniform(-0.05, 0.05, (envs, 4)).astype(np.float32)
    w = np.array([0.1, 0.5, 4.0, 1.0, 0.0], np.float32)
    return state, w


def make_rollout(horizon, grid, block, stream=0):
    def rollout(state, w, action, reward, done):
        for _ in range(horizon):
            policy[grid, block, stream](state, w, action)
            physics[grid, block, stream](state, action, reward, done)
    return rollout


def builders(env, envs, horizon, block):
    grid = (envs + block - 1) // block
    rollout = make_rollout(horizon, grid, block)
    state0, w0 = initial(envs)
    zeros = np.zeros(envs, np.float32)

    def numba_args():
        return [cuda.to_device(state0), cuda.to_device(w0), cuda.to_device(zeros),
                cuda.to_device(zeros), cuda.to_device(zeros)]

    def reset_and_run(args, run_once):
        for d, h in zip(args, (state0, w0, zeros, zeros, zeros)):
            d.copy_to_device(h)
        run_once()
        env.sync()
        return [a.copy_to_host() for a in args]

    ref = {}

    def check_with(args, run_once):
        def check():
            if "out" not in ref:      # the eager run from the same state is the reference
                eager = numba_args()
                ref["out"] = reset_and_run(eager, lambda: rollout(*eager))
            got = reset_and_run(args, run_once)
            for g, want in zip(got, ref["out"]):
                msg = compare(g, want, rtol=1e-4, atol=1e-5)
                if msg:
                    return msg
            return None
        return check

    def numba_eager():
        args = numba_args()
        return Bench(lambda: rollout(*args), keep=args)

    def numba_capture():
        env.need_gpu("stream capture")
        args = numba_args()
        rollout(*args)
        env.sync()
        replay, how = capture_numba(env, lambda s: make_rollout(horizon, grid, block, s)(*args))
        return Bench(replay, check=check_with(args, replay), note=how, keep=(replay, args))

    def tracegraph():
        args = numba_args()
        return tracegraph_bench(env, rollout, tuple(args),
                                check=lambda f: check_with(args, lambda: f.replay(*args))())

    def torch_eager(graph=False):
        torch = env.torch
        if torch is None:
            raise Skip(env.notes.get("torch", "torch unavailable"))
        state = torch.from_numpy(state0).cuda()
        w = torch.from_numpy(w0).cuda()
        reward = torch.zeros(envs, device="cuda")
        done = torch.zeros(envs, device="cuda")
        r = 0.01 * (torch.arange(envs, device="cuda") % 7 - 3).float()
        reset = torch.stack([r, -r, r, -r], 1)

        def env_step():
            force = torch.where(state @ w[:4] + w[4] > 0, FORCE, -FORCE)
            x, x_dot, th, th_dot = state.unbind(1)
            costh, sinth = torch.cos(th), torch.sin(th)
            temp = (force + POLEMASS_LENGTH * th_dot * th_dot * sinth) / TOTAL_MASS
            thacc = (GRAVITY * sinth - costh * temp) / (
                LENGTH * (4.0 / 3.0 - MASSPOLE * costh * costh / TOTAL_MASS))
            xacc = temp - POLEMASS_LENGTH * thacc * costh / TOTAL_MASS
            new = torch.stack([x + TAU * x_dot, x_dot + TAU * xacc,
                               th + TAU * th_dot, th_dot + TAU * thacc], 1)
            d = (new[:, 0].abs() > X_LIM) | (new[:, 2].abs() > TH_LIM)
            reward.add_(1.0)
            done.add_(d.float())
            state.copy_(torch.where(d[:, None], reset, new))

        def step():
            for _ in range(horizon):
                env_step()
        note = "vectorized torch ops (~30 small kernels per env step)"
        if graph:
            g = torch_graph(torch, step)
            return Bench(g.replay, note=note, keep=(g, state, w, reward, done, reset))
        return Bench(step, note=note, keep=(state, w, reward, done, reset))

    def cupy_eager(graph=False):
        cp = env.cupy
        if cp is None:
            raise Skip(env.notes.get("cupy", "cupy unavailable"))
        mod = cp.RawModule(code=CUPY_SRC)
        kp, kphys = mod.get_function("policy"), mod.get_function("physics")
        state, w = cp.asarray(state0), cp.asarray(w0)
        action, reward, done = (cp.zeros(envs, dtype=cp.float32) for _ in range(3))
        n = np.int32(envs)

        def step():
            for _ in range(horizon):
                kp((grid,), (block,), (state, w, action, n))
                kphys((grid,), (block,), (state, action, reward, done, n))
        note = "cupy.RawModule, the same two kernels in CUDA C++"
        if graph:
            launch = cupy_graph(cp, step)
            return Bench(launch, note=note, keep=(launch, mod, state, w, action, reward, done))
        return Bench(step, note=note, keep=(mod, state, w, action, reward, done))

    return [("numba_eager", numba_eager), ("numba_capture", numba_capture),
            ("tracegraph", tracegraph),
            ("torch_eager", torch_eager), ("torch_graph", lambda: torch_eager(True)),
            ("cupy_eager", cupy_eager), ("cupy_graph", lambda: cupy_eager(True))]


def run(env, native=None):
    s = sizes(env.cfg)
    case = f"envs={s['envs']},T={s['horizon']}"
    return [run_bench(env, ID, case, name, build)
            for name, build in builders(env, s["envs"], s["horizon"], s["block"])]
