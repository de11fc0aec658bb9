"""pyenv_pendulum.py: Gymnasium's Pendulum-v1 in plain numpy, a continuous-action env for the
Python env bridge's tests (tests/check_pyenv.c, tests/check_dpg_actor.c, the smoke test
tests/smoke/python_continuous.sh), run by python/apex_env.py (--make
tests/pyenv_pendulum.py:pendulum --kwargs JSON).

PendulumEnv follows gymnasium/envs/classic_control/pendulum.py (g = 10.0) line for line,
with its TimeLimit of 200 steps and its seeding (reset(seed=s) makes the generator
np.random.Generator(PCG64(SeedSequence(s))), as gymnasium.utils.seeding.np_random does, and
draws the state uniform in [-pi, pi] x [-1, 1]), so that it computes what Gymnasium does. Two
departures, both for the tests' sake:
  - np.sin/np.cos are math.sin/math.cos (libm): the numbers of Gymnasium under numpy >= 1.25
    everywhere, and of numpy 1.22-1.24 without AVX-512, which apex's built-in Pendulum-v1
    (envs/env_pendulum.c) reproduces bit for bit. numpy 1.22-1.24 with AVX-512 computes them
    with SVML, an ulp away half the time, and a pendulum amplifies an ulp.
  - start=[theta, theta_dot] (a kwarg) puts every reset's state there after its draw
    (theta + 0.25 * the env's index in its worker, so that envs differ): the built-in env's
    seeding is apex's own (env.h), so the tests compare the dynamics from given states.
faults={"I": mode} makes env I of every worker misbehave at step fault_at of each episode,
as tests/pyenv_faults.py's Counter does: raise, nan (observation), reward_nan, shape,
dtype (float64 observation).

No gymnasium: the spaces are duck-typed like python/apex_env.py expects them.
"""
import math

import numpy as np

DEFAULT_X, DEFAULT_Y = np.pi, 1.0


class Box:
    def __init__(self, low, high, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.low = np.full(self.shape, low, dtype=self.dtype)
        self.high = np.full(self.shape, high, dtype=self.dtype)


def angle_normalize(x):
    return ((x + np.pi) % (2 * np.pi)) - np.pi


class PendulumEnv:
    max_episode_steps = 200

    def __init__(self, g=10.0, start=None, index=0, faults=None, fault_at=3,
                 action_dtype="float32", low=-2.0, high=2.0):
        self.max_speed = 8
        self.max_torque = 2.0
        self.dt = 0.05
        self.g = g
        self.m = 1.0
        self.l = 1.0
        high_obs = np.array([1.0, 1.0, self.max_speed], dtype=np.float32)
        self.action_space = Box(low, high, (1,), action_dtype)
        self.observation_space = Box(0.0, 0.0, (3,), np.float32)
        self.observation_space.low, self.observation_space.high = -high_obs, high_obs
        self.start = None if start is None else (float(start[0]) + 0.25 * index, float(start[1]))
        self.fault = (faults or {}).get(str(index))
        self.fault_at = fault_at
        self.np_random = None
        self.state = None
        self.elapsed = 0

    def step(self, u):
        th, thdot = self.state  # th := theta

        g = self.g
        m = self.m
        l = self.l
        dt = self.dt

        u = np.clip(u, -self.max_torque, self.max_torque)[0]
        self.last_u = u  # for rendering
        costs = angle_normalize(th) ** 2 + 0.1 * thdot**2 + 0.001 * (u**2)

        newthdot = thdot + (3 * g / (2 * l) * math.sin(th) + 3.0 / (m * l**2) * u) * dt
        newthdot = np.clip(newthdot, -self.max_speed, self.max_speed)
        newth = th + newthdot * dt

        self.state = np.array([newth, newthdot])
        self.elapsed += 1
        obs, reward = self._get_obs(), -costs
        if self.fault is not None and self.elapsed == self.fault_at:
            if self.fault == "raise":
                raise RuntimeError("pendulum fault at step %d" % self.elapsed)
            if self.fault == "nan":
                obs[2] = np.nan
            elif self.fault == "reward_nan":
                reward = float("nan")
            elif self.fault == "shape":
                obs = np.zeros(4, dtype=np.float32)
            elif self.fault == "dtype":
                obs = obs.astype(np.float64)
        return obs, reward, False, self.elapsed >= self.max_episode_steps, {}

    def reset(self, *, seed=None, options=None):
        if seed is not None or self.np_random is None:
            self.np_random = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))
        high = np.array([DEFAULT_X, DEFAULT_Y])
        low = -high  # We enforce symmetric limits.
        self.state = self.np_random.uniform(low=low, high=high)
        if self.start is not None:
            self.state = np.array(self.start)
        self.last_u = None
        self.elapsed = 0
        return self._get_obs(), {}

    def _get_obs(self):
        theta, thetadot = self.state
        return np.array([math.cos(theta), math.sin(theta), thetadot], dtype=np.float32)


def pendulum(apex_worker=0, apex_env=0, **kw):
    return PendulumEnv(index=apex_env, **kw)


class DiscretePendulum(PendulumEnv):
    """The same with a Discrete(3) action space (torques -2, 0, 2): refused in a continuous
    run."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.action_space = type("Discrete", (), {"n": 3, "start": 0})()


def discrete_pendulum(apex_worker=0, apex_env=0, **kw):
    return DiscretePendulum(index=apex_env, **kw)


def eval_reference(n, seed, first):
    """(run as a script: N SEED FIRST) What apex-eval --checkpoint should get on n envs of
    pendulum() for the policy mu(s) = 0 (check_pyenv_cont.c's zero network: the middle of
    [-2, 2]): env e reset with seed + first + e, its first episode (200 steps) counted, the
    float32 rewards the bridge carries summed in float64. Prints the count and the mean
    (%.4f)."""
    rets = []
    for e in range(n):
        env = pendulum(apex_env=e)
        env.reset(seed=seed + first + e)
        ret, done = 0.0, False
        while not done:
            _, r, term, trunc, _ = env.step(np.zeros(1, dtype=np.float32))
            ret += float(np.float32(r))
            done = term or trunc
        rets.append(ret)
    print(len(rets), "%.4f" % (sum(rets) / len(rets)))


if __name__ == "__main__":
    import sys
    eval_reference(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
