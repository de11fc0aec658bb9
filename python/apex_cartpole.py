"""apex_cartpole.py: CartPole-v1 as a Gymnasium-style Python env, for [env] id = python.

A transcription of Gymnasium's classic_control/cartpole.py (CartPoleEnv, "euler"
integration) wrapped in TimeLimit(max_episode_steps=500), with numpy and the standard
library only, so that apex's Python env path can be tried, tested and benchmarked where
gymnasium is not installed:

    [env]
    id = python
    make = apex_cartpole:CartPoleEnv      ; python/ is on the workers' sys.path
    obs_dim = 4
    n_actions = 2

Same constants, same float64 arithmetic in the same order (math.sin/math.cos as Gymnasium
calls them), float32 observations, reward 1.0 on every step including the terminating one,
terminated when |x| > 2.4 or |theta| > 12 degrees, truncated at 500 steps. reset(seed=s)
draws the start state U(-0.05, 0.05)^4 from numpy.random.default_rng(s) (Gymnasium's
np_random for that seed), an unseeded reset continues the env's stream: the same episodes
as gymnasium.make("CartPole-v1") for the same seeds, and as apex's built-in CartPole-v1
dynamics (envs/env_cartpole.c), which is what lets a checkpoint trained here be evaluated
there ([env] eval_id = CartPole-v1). tests/pyenv_faults.py compare checks it step for step
against an independent reference when one is at hand.

No rendering, no render_mode, no "steps beyond terminated" warning (apex never steps an
ended episode: the worker resets it at once).
"""
import math

import numpy as np


class Box:
    """The observation space, as much of gymnasium.spaces.Box as apex reads."""

    def __init__(self, low, high, dtype):
        self.low, self.high = low, high
        self.dtype = np.dtype(dtype)
        self.shape = low.shape

    def __repr__(self):
        return "Box(%s, %s)" % (self.shape, self.dtype)


class Discrete:
    """The action space, as much of gymnasium.spaces.Discrete as apex reads."""

    def __init__(self, n, start=0):
        self.n, self.start = n, start

    def __repr__(self):
        return "Discrete(%d)" % self.n


class CartPoleEnv:
    gravity = 9.8
    masscart = 1.0
    masspole = 0.1
    total_mass = masspole + masscart
    length = 0.5  # half the pole's length
    polemass_length = masspole * length
    force_mag = 10.0
    tau = 0.02  # seconds between state updates
    theta_threshold_radians = 12 * 2 * math.pi / 360
    x_threshold = 2.4

    def __init__(self, max_episode_steps=500):
        high = np.array([self.x_threshold * 2, np.finfo(np.float32).max,
                         self.theta_threshold_radians * 2, np.finfo(np.float32).max],
                        dtype=np.float32)
        self.observation_space = Box(-high, high, np.float32)
        self.action_space = Discrete(2)
        self.max_episode_steps = max_episode_steps
        self.np_random = np.random.default_rng()
        self.state = None
        self.elapsed = 0

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        self.state = self.np_random.uniform(low=-0.05, high=0.05, size=(4,))
        self.elapsed = 0
        return np.array(self.state, dtype=np.float32), {}

    def step(self, action):
        if self.state is None:
            raise RuntimeError("call reset before step")
        if action not in (0, 1):
            raise ValueError("action %r is not in Discrete(2)" % (action,))
        x, x_dot, theta, theta_dot = self.state
        force = self.force_mag if action == 1 else -self.force_mag
        costheta = math.cos(theta)
        sintheta = math.sin(theta)
        # https://coneural.org/florian/papers/05_cart_pole.pdf, as Gymnasium writes it
        temp = (force + self.polemass_length * np.square(theta_dot) * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * np.square(costheta) / self.total_mass))
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        # "euler": positions move with the old velocities
        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * xacc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * thetaacc
        self.state = (x, x_dot, theta, theta_dot)
        terminated = bool(x < -self.x_threshold or x > self.x_threshold
                          or theta < -self.theta_threshold_radians
                          or theta > self.theta_threshold_radians)
        self.elapsed += 1
        truncated = self.elapsed >= self.max_episode_steps  # TimeLimit
        return np.array(self.state, dtype=np.float32), 1.0, terminated, truncated, {}
