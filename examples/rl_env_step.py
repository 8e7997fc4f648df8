"""A batched RL environment step: cart-pole physics for thousands of environments plus a
small policy network, `horizon` steps per graph.

Per step: the policy (two tiled matmuls, bias adds, tanh, one comparison: tracegraph.ops)
picks a push direction for every environment, then a user's @cuda.jit kernel advances
the cart-pole physics in place, counts rewards and resets environments that fell.
The state, reward and done counters are the caller's device arrays, updated in place.

    python examples/rl_env_step.py
"""
from __future__ import annotations

import math

import _support  # first: picks the GPU, or Numba's simulator before Numba loads
import numpy as np
from numba import cuda

import tracegraph as tg
from tracegraph import ops

# Classic cart-pole constants (Barto, Sutton & Anderson; as in Gym).
GRAVITY, TOTAL_MASS, LENGTH, POLEMASS_LENGTH, MASSPOLE = 9.8, 1.1, 0.5, 0.05, 0.1
FORCE, TAU, X_LIMIT, THETA_LIMIT = 10.0, 0.02, 2.4, 0.2095


@cuda.jit
def cartpole_physics(state, push_right, reward, done):
    """One Euler step of every environment; a fallen one counts in `done` and restarts."""
    for i in range(cuda.grid(1), state.shape[0], cuda.gridsize(1)):
        x, x_dot, theta, theta_dot = state[i, 0], state[i, 1], state[i, 2], state[i, 3]
        force = FORCE if push_right[i] else -FORCE
        cos_t = math.cos(theta)
        sin_t = math.sin(theta)
        temp = (force + POLEMASS_LENGTH * theta_dot * theta_dot * sin_t) / TOTAL_MASS
        theta_acc = (GRAVITY * sin_t - cos_t * temp) / (
            LENGTH * (4.0 / 3.0 - MASSPOLE * cos_t * cos_t / TOTAL_MASS))
        x_acc = temp - POLEMASS_LENGTH * theta_acc * cos_t / TOTAL_MASS
        x = x + TAU * x_dot
        x_dot = x_dot + TAU * x_acc
        theta = theta + TAU * theta_dot
        theta_dot = theta_dot + TAU * theta_acc
        reward[i] += 1.0
        if x < -X_LIMIT or x > X_LIMIT or theta < -THETA_LIMIT or theta > THETA_LIMIT:
            done[i] += 1.0
            r = 0.01 * ((i % 7) - 3)
            x, x_dot, theta, theta_dot = r, -r, r, -r
        state[i, 0] = x
        state[i, 1] = x_dot
        state[i, 2] = theta
        state[i, 3] = theta_dot


def policy(state, w1, b1, w2, b2):
    """A 4 -> hidden -> 2 network; push right where logit 1 beats logit 0."""
    h = ops.tanh(state @ w1 + b1)
    logits = h @ w2 + b2
    return logits[:, 1] > logits[:, 0]


@tg.compile
def rollout(state, reward, done, w1, b1, w2, b2, horizon):
    envs = state.shape[0]
    threads = 256 if _support.GPU else 8
    blocks = min(-(-envs // threads), 1024 if _support.GPU else 2)
    for _ in range(horizon):
        push_right = policy(state, w1, b1, w2, b2)
        cartpole_physics[blocks, threads](state, push_right, reward, done)
    return state, reward, done


def reference(state, reward, done, w1, b1, w2, b2, horizon):
    state, reward, done = state.copy(), reward.copy(), done.copy()
    reset = 0.01 * ((np.arange(len(state)) % 7) - 3)
    for _ in range(horizon):
        h = np.tanh(state @ w1 + b1)
        logits = h @ w2 + b2
        force = np.where(logits[:, 1] > logits[:, 0], FORCE, -FORCE)
        x, x_dot, theta, theta_dot = state.T
        cos_t, sin_t = np.cos(theta), np.sin(theta)
        temp = (force + POLEMASS_LENGTH * theta_dot * theta_dot * sin_t) / TOTAL_MASS
        theta_acc = (GRAVITY * sin_t - cos_t * temp) / (
            LENGTH * (4.0 / 3.0 - MASSPOLE * cos_t * cos_t / TOTAL_MASS))
        x_acc = temp - POLEMASS_LENGTH * theta_acc * cos_t / TOTAL_MASS
        new = np.stack([x + TAU * x_dot, x_dot + TAU * x_acc,
                        theta + TAU * theta_dot, theta_dot + TAU * theta_acc], axis=1)
        fell = ((new[:, 0] < -X_LIMIT) | (new[:, 0] > X_LIMIT) | (new[:, 2] < -THETA_LIMIT)
                | (new[:, 2] > THETA_LIMIT))
        reward += 1.0
        done += fell
        new[fell] = np.stack([reset, -reset, reset, -reset], axis=1)[fell]
        state = new
    return state, reward, done


def main(small: bool | None = None) -> None:
    """Run the example; `small` (the default without a GPU) uses simulator-sized inputs."""
    small = not _support.GPU if small is None else small
    envs, hidden, horizon = (6, 8, 3) if small else (4096, 32, 16)
    print(f"rl_env_step on the {_support.where()}: {envs} cart-poles, policy 4-{hidden}-2, "
          f"{horizon} steps per graph")
    rng = np.random.default_rng(0)
    state0 = rng.uniform(-0.05, 0.05, (envs, 4))
    state0[::3, 2:] = (0.2, 0.5)  # every third pole starts about to fall: resets happen
    weights = [rng.standard_normal((4, hidden)) * 2.0, 0.1 * rng.standard_normal(hidden),
               rng.standard_normal((hidden, 2)), 0.1 * rng.standard_normal(2)]
    zeros = np.zeros(envs)
    d_state, d_reward, d_done, *d_weights = _support.device(state0, zeros, zeros, *weights)
    rollout(d_state, d_reward, d_done, *d_weights, horizon)
    print(f"  one graph: {len(rollout.latest.plan.nodes)} nodes")
    want = reference(state0, zeros, zeros, *weights, horizon)
    for name, got, ref in zip(("state", "reward", "done"), (d_state, d_reward, d_done), want):
        _support.check(f"cart-pole {name} after {horizon} steps", got, ref, rtol=1e-9, atol=1e-9)
    rollout.replay(d_state, d_reward, d_done, *d_weights, horizon)
    want = reference(*want, *weights, horizon)
    _support.check(f"cart-pole state after {2 * horizon} steps (replayed)", d_state, want[0],
                   rtol=1e-9, atol=1e-9)
    _support.check(f"cart-pole resets after {2 * horizon} steps", d_done, want[2])
    print(f"  environments that fell at least once: {int((want[2] > 0).sum())} of {envs}")
    _support.report_timing(f"{horizon} env steps", rollout,
                           (d_state, d_reward, d_done, *d_weights, horizon))


if __name__ == "__main__":
    main()
