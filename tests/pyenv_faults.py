"""pyenv_faults.py: env factories for tests/check_pyenv.c and bench/bench_pyenv.c, run by
python/apex_env.py (--make tests/pyenv_faults.py:NAME --kwargs JSON).

  cartpole(path)  the reference CartPole-v1 (a file outside the repo, e.g.
                  ../shared/peers/cartpole_env.py, given by the test as a path) behind the
                  Gymnasium API: reset(seed) -> (obs, info), step -> 5-tuple, spaces; or,
                  for a path to python/apex_cartpole.py, its CartPoleEnv as it is.
  faulty_cartpole(every)  python/apex_cartpole.py's CartPole whose step raises once every
                  `every` steps (counted per env): the faults smoke test.
  slow_cartpole(seconds)  the same, made after a sleep (a worker slow to say HELLO).
  counter(...)    a deterministic env whose observations are a closed form the C test
                  computes too, with one env made faulty on request (see Counter).
  image(...)      the same as uint8 frames of shape (3, 2, 2).
  reference_trajectory()  (run as a script) the plain-Python run check_pyenv.c compares
                  the bridge's CartPole against.
  compare(peer)   (--compare PEER) python/apex_cartpole.py against the independent
                  reference PEER, step for step: exit 0 and "IDENTICAL" when they agree.
  eval_reference(...)  (--eval-reference) the returns apex-eval --checkpoint should get on
                  python CartPole for a fixed linear policy (check_pyenv.c's evaluation test).
  eval_rounds_reference(...)  (--eval-rounds) the means of successive evaluations by one
                  evaluator whose Python workers live on between them.
  dynamics()      (--dynamics) python/apex_cartpole.py from given states and actions, for
                  check_pyenv.c to compare with Gymnasium's trajectories (tests/fixtures).

No gymnasium: the spaces are duck-typed like python/apex_env.py expects them.
"""
import importlib.util
import os
import struct
import sys
import time

import numpy as np


class Box:
    """A Box; without low and high (None) it has no .low/.high at all (not a usable action
    space)."""

    def __init__(self, dtype, shape, low=None, high=None):
        self.dtype, self.shape = np.dtype(dtype), tuple(shape)
        if low is not None:
            self.low = np.full(self.shape, low, dtype=self.dtype)
            self.high = np.full(self.shape, high, dtype=self.dtype)

    def __repr__(self):
        return "Box(%s, %s)" % (self.dtype, self.shape)


class Discrete:
    def __init__(self, n, start=0):
        self.n, self.start = n, start


# ---- the reference CartPole behind the Gymnasium API -------------------------------------

_MODULES = {}


def _load(path):
    path = os.path.abspath(path)
    if path not in _MODULES:
        spec = importlib.util.spec_from_file_location("apex_ref_cartpole", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _MODULES[path] = mod
    return _MODULES[path]


class GymCartPole:
    """The reference CartPole (reset -> obs, step -> 4-tuple, its own 500-step limit) with
    Gymnasium's signatures."""

    observation_space = Box(np.float32, (4,))
    action_space = Discrete(2)

    def __init__(self, path, max_episode_steps=500):
        self.env = _load(path).CartPole(max_episode_steps=max_episode_steps)

    def reset(self, seed=None):
        return self.env.reset(seed=seed), {}

    def step(self, action):
        obs, reward, terminated, truncated = self.env.step(action)
        return obs, reward, terminated, truncated, {}


def cartpole(path, max_episode_steps=500):
    mod = _load(path)
    if hasattr(mod, "CartPoleEnv"):  # python/apex_cartpole.py: the Gymnasium API already
        return mod.CartPoleEnv(max_episode_steps=max_episode_steps)
    return GymCartPole(path, max_episode_steps)


APEX_CARTPOLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python",
                             "apex_cartpole.py")


class FaultyCartPole:
    """apex_cartpole's CartPoleEnv whose step raises RuntimeError at every `every`-th step
    of this env (the step is void; the worker resets the env)."""

    def __init__(self, every=50):
        self.env = _load(APEX_CARTPOLE).CartPoleEnv()
        self.observation_space, self.action_space = self.env.observation_space, \
            self.env.action_space
        self.every, self.count = every, 0

    def reset(self, seed=None, options=None):
        return self.env.reset(seed=seed)

    def step(self, action):
        self.count += 1
        if self.count % self.every == 0:
            raise RuntimeError("injected fault at step %d of this env" % self.count)
        return self.env.step(action)


def faulty_cartpole(every=50):
    return FaultyCartPole(every)


def slow_cartpole(seconds=60):
    """apex_cartpole's CartPole, made after `seconds` of sleep (a worker slow to start)."""
    time.sleep(seconds)
    return _load(APEX_CARTPOLE).CartPoleEnv()


# ---- a deterministic env with injectable faults ------------------------------------------

class Counter:
    """obs float32 [seed, episode, t, last action] (last action -1 after a reset), reward
    t + 0.5 * action. With action_dim D > 0 the action space is a Box(0, 4, (D,)) of
    action_dtype instead of Discrete(n_actions), and "the action" is sum_i a[i] * 4^i (float64
    of the float32 values the actor sent: the test picks values exact in float32). An episode lasts L = 3 + seed % 5 steps and then terminates (seed
    even) or is truncated (seed odd). reset(seed=s) starts episode 0 of seed s; an unseeded
    reset starts the next episode.

    Faults: `faults` maps "W.I" (worker W's env I) to a mode, applied at step `fault_at` of
    every episode, or only once over all processes when `once_file` is given (the file marks
    it done, so a restarted worker does not fault again):
      raise       step raises RuntimeError("boom ...")
      nan         the observation holds a NaN
      reward_nan  the reward is NaN
      shape       the observation has shape (5,)
      dtype       the observation is float64
      bad_return  step returns a 4-tuple (the old gym API)
      hang        step sleeps for ever (the worker must be killed)
      exit        the worker process dies (os._exit(1))
      reset_raise step raises, and the next `reset_failures` resets raise too
    """

    observation_space = Box(np.float32, (4,))

    def __init__(self, apex_worker=0, apex_env=0, faults=None, fault_at=2, once_file=None,
                 reset_failures=1, n_actions=3, action_dim=0, action_dtype="float32",
                 action_low=0.0, action_high=4.0):
        if action_dim:
            self.action_space = Box(action_dtype, (action_dim,), action_low, action_high)
        else:
            self.action_space = Discrete(n_actions)
        self.fault = (faults or {}).get("%d.%d" % (apex_worker, apex_env))
        self.fault_at, self.once_file = fault_at, once_file
        self.reset_failures_left = 0
        self.reset_failures = reset_failures
        self.seed, self.episode, self.t = 0, 0, 0

    def _obs(self, a):
        return np.array([self.seed, self.episode, self.t, a], dtype=np.float32)

    def reset(self, seed=None):
        if self.reset_failures_left > 0:
            self.reset_failures_left -= 1
            raise RuntimeError("reset refused (%d more)" % self.reset_failures_left)
        if seed is not None:
            self.seed, self.episode = int(seed), 0
        else:
            self.episode += 1
        self.t = 0
        return self._obs(-1), {}

    def _fault_now(self):
        if self.fault is None or self.t != self.fault_at:
            return False
        if self.once_file:
            try:
                fd = os.open(self.once_file, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return False
            os.close(fd)
        return True

    def step(self, action):
        if isinstance(action, np.ndarray):  # a Box's action: its dtype and shape, in bounds
            sp = self.action_space
            assert action.dtype == sp.dtype and action.shape == sp.shape, (action.dtype,
                                                                           action.shape)
            assert (action >= sp.low).all() and (action <= sp.high).all(), action
            action = float(sum(float(v) * 4.0 ** i for i, v in enumerate(action)))
        self.t += 1
        L = 3 + self.seed % 5
        obs, reward = self._obs(action), self.t + 0.5 * action
        terminated = self.t >= L and self.seed % 2 == 0
        truncated = self.t >= L and self.seed % 2 == 1
        if self._fault_now():
            f = self.fault
            if f == "raise":
                raise RuntimeError("boom at step %d" % self.t)
            if f == "nan":
                obs[1] = np.nan
            elif f == "reward_nan":
                reward = float("nan")
            elif f == "shape":
                obs = np.zeros(5, dtype=np.float32)
            elif f == "dtype":
                obs = obs.astype(np.float64)
            elif f == "bad_return":
                return obs, reward, terminated, {}
            elif f == "hang":
                while True:
                    time.sleep(3600)
            elif f == "exit":
                os._exit(1)
            elif f == "reset_raise":
                self.reset_failures_left = self.reset_failures
                raise RuntimeError("boom before broken resets")
        return obs, reward, terminated, truncated, {}


def counter(apex_worker=0, apex_env=0, **kw):
    return Counter(apex_worker=apex_worker, apex_env=apex_env, **kw)


class Image(Counter):
    """Counter's values as uint8 frames (3, 2, 2): pixel p of the frame is (seed + 16 *
    episode + t + p) % 256."""

    observation_space = Box(np.uint8, (3, 2, 2))

    def _obs(self, a):
        p = np.arange(12, dtype=np.int64)
        return ((self.seed + 16 * self.episode + self.t + p) % 256).astype(np.uint8).reshape(3, 2, 2)


def image(apex_worker=0, apex_env=0, **kw):
    return Image(apex_worker=apex_worker, apex_env=apex_env, **kw)


class NoDiscrete(Counter):
    """An env whose action space has no .n and no bounds (neither a Discrete nor a usable Box):
    refused by the actor."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.action_space = Box(np.float32, (1,))


def no_discrete(apex_worker=0, apex_env=0, **kw):
    return NoDiscrete(apex_worker=apex_worker, apex_env=apex_env, **kw)


# ---- the plain-Python run the bridge is compared with -------------------------------------

def policy(e, t, obs):
    """The actions of check_pyenv.c's CartPole test: even envs balance the pole (a linear
    controller, so episodes reach the 500-step truncation), odd envs act pseudo-randomly
    (they terminate). Computed in double from the float32 observation, like the C side."""
    if e % 2 == 0:
        s = float(obs[2]) + 0.5 * float(obs[3]) + 0.01 * float(obs[0]) + 0.1 * float(obs[1])
        return 1 if s > 0.0 else 0
    return ((t * 1103515245 + e * 12345) >> 16) & 1


def reference_trajectory(path, n_envs, steps, seed):
    """Steps n_envs reference CartPoles (env e reset with seed + e, later resets unseeded)
    with `policy`, auto-resetting as the bridge does, and writes the start observations
    (n_envs x 4 x f32), then for every step t and env e: next_obs (4 x f32), obs to act on
    (4 x f32), reward (f64), terminated, truncated (u8)."""
    envs = [cartpole(path) for _ in range(n_envs)]
    obs = [env.reset(seed=seed + e)[0] for e, env in enumerate(envs)]
    out = sys.stdout.buffer
    for o in obs:
        out.write(struct.pack("<4f", *o.tolist()))
    rec = struct.Struct("<4f4fdBB")
    for t in range(steps):
        for e, env in enumerate(envs):
            o, r, te, tr, _ = env.step(policy(e, t, obs[e]))
            nxt = o
            if te or tr:
                o, _ = env.reset()
            obs[e] = o
            out.write(rec.pack(*nxt.tolist(), *o.tolist(), float(r), int(te), int(tr)))
    out.flush()


def compare(peer, seeds=20, steps=3000):
    """python/apex_cartpole.py against the reference at path peer: the same seeds, the same
    (random and balancing) actions, auto-reset; every observation's bytes, reward and flag
    must agree. Prints IDENTICAL and returns 0, or the first difference and 1."""
    ours, ref = cartpole(APEX_CARTPOLE), cartpole(peer)
    assert type(ours).__name__ == "CartPoleEnv" and type(ref).__name__ == "GymCartPole"
    rng = np.random.default_rng(7)
    episodes = 0
    for seed in range(seeds):
        a, b = ours.reset(seed=seed)[0], ref.reset(seed=seed)[0]
        for t in range(steps):
            if a.tobytes() != b.tobytes():
                print("seed %d step %d: observations %r and %r" % (seed, t, a, b))
                return 1
            act = policy(seed, t, a) if seed % 2 == 0 else int(rng.integers(2))
            ra, rb = ours.step(act), ref.step(act)
            if ra[0].tobytes() != rb[0].tobytes() or ra[1:4] != rb[1:4]:
                print("seed %d step %d: step returns %r and %r" % (seed, t, ra[:4], rb[:4]))
                return 1
            a, b = ra[0], rb[0]
            if ra[2] or ra[3]:
                episodes += 1
                a, b = ours.reset()[0], ref.reset()[0]
    print("IDENTICAL: %d seeds x %d steps, %d episodes" % (seeds, steps, episodes))
    return 0


def dynamics():
    """python/apex_cartpole.py from given states, for check_pyenv.c to compare with
    Gymnasium's own trajectories (tests/fixtures/env_trajectories.h, generated by Gymnasium's
    code). Each stdin line is "x x_dot theta theta_dot a0 a1 ...": the env starts in that
    state and takes the actions; for every step it writes the observation (4 x f32), the
    reward (f32), terminated and truncated (u8). A line "LIMIT x x_dot theta theta_dot" runs
    the balancing policy from that state until the episode ends and writes the step count
    (u32) and terminated, truncated (u8): the TimeLimit's 500."""
    env = _load(APEX_CARTPOLE).CartPoleEnv()  # as [env] make builds it: its own TimeLimit
    out = sys.stdout.buffer
    for line in sys.stdin:
        f = line.split()
        limit = f[0] == "LIMIT"
        if limit:
            f = f[1:]
        env.reset(seed=0)
        env.state = np.array([float(v) for v in f[:4]], dtype=np.float64)
        env.elapsed = 0
        if limit:
            obs, t = np.array(env.state, dtype=np.float32), 0
            while True:
                obs, _, te, tr, _ = env.step(policy(0, t, obs))
                t += 1
                if te or tr:
                    out.write(struct.pack("<IBB", t, int(te), int(tr)))
                    break
            continue
        for a in f[4:]:
            o, r, te, tr, _ = env.step(int(a))
            out.write(struct.pack("<4ffBB", *o.tolist(), float(r), int(te), int(tr)))
    out.flush()


def eval_reference(n, seed, first, every, wt, wd, lag=0):
    """(--eval-reference) What apex-eval --checkpoint should get on n envs of
    python/apex_cartpole.py (FaultyCartPole when every > 0) for the greedy policy
    "push right (action 1) iff wt * theta + wd * theta_dot > 0" (the two-unit network
    check_pyenv.c writes): env e reset with seed + first + e, its first episode counted; a
    faulted step drops the episode and resets the env unseeded (as the worker does), and the
    next episode counts; an env faulting more than 8 times gives nothing. lag = 1: the policy
    reads the previous observation instead ([env] frame_stack = 2, the older frame of the
    stack, an episode's first frame at its start). Prints the count and the mean return
    (%.4f)."""
    rets = []
    for e in range(n):
        env = _load(APEX_CARTPOLE).CartPoleEnv()
        obs, _ = env.reset(seed=seed + first + e)
        older = obs
        count, faults, ret = 0, 0, 0.0
        while True:
            count += 1
            if every > 0 and count % every == 0:
                faults += 1
                if faults > 8:
                    break
                obs, _ = env.reset()
                older = obs
                ret = 0.0
                continue
            seen = older if lag else obs
            u = np.float32(wt) * seen[2] + np.float32(wd) * seen[3]
            older = obs
            obs, r, term, trunc, _ = env.step(1 if u > 0 else 0)
            ret += r
            if term or trunc:
                rets.append(ret)
                break
    print(len(rets), "%.4f" % (sum(rets) / len(rets) if rets else float("nan")))


def eval_rounds_reference(n, seed, first, wt, wd, rounds):
    """(--eval-rounds) The means of `rounds` successive evaluations of n envs (no faults) by
    one evaluator, whose workers live on between them (actor/evaluator.h): the envs step in
    lock step, a round ends when its last env has finished its counted episode, and the next
    round counts, for each env, the first episode that starts at or after that step (an
    episode in progress finishes uncounted). The same greedy policy as eval_reference's."""
    ends, rets = [], []  # per env: each episode's end step and return, enough of them
    for e in range(n):
        env = _load(APEX_CARTPOLE).CartPoleEnv()
        obs, _ = env.reset(seed=seed + first + e)
        t, ret, ends_e, rets_e = 0, 0.0, [], []
        while len(ends_e) < 4 * rounds + 4:
            u = np.float32(wt) * obs[2] + np.float32(wd) * obs[3]
            obs, r, term, trunc, _ = env.step(1 if u > 0 else 0)
            t, ret = t + 1, ret + r
            if term or trunc:
                ends_e.append(t)
                rets_e.append(ret)
                obs, _ = env.reset()
                ret = 0.0
        ends.append(ends_e)
        rets.append(rets_e)
    start, out = 0, []
    for _ in range(rounds):
        got, last = [], start
        for e in range(n):
            # the first episode starting at or after `start`: its predecessor ended by then
            k = next(k for k in range(len(ends[e]))
                     if (ends[e][k - 1] if k else 0) >= start)
            got.append(rets[e][k])
            last = max(last, ends[e][k])
        out.append("%.4f" % (sum(got) / n))
        start = last
    print(" ".join(out))


if __name__ == "__main__":
    if sys.argv[1] == "--eval-rounds":
        sys.exit(eval_rounds_reference(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
                                       float(sys.argv[5]), float(sys.argv[6]),
                                       int(sys.argv[7])))
    if sys.argv[1] == "--eval-reference":
        sys.exit(eval_reference(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
                                int(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7]),
                                int(sys.argv[8]) if len(sys.argv) > 8 else 0))
    if sys.argv[1] == "--compare":
        sys.exit(compare(sys.argv[2]))
    if sys.argv[1] == "--dynamics":
        sys.exit(dynamics())
    reference_trajectory(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
