"""apex_atari_check.py: python/apex_atari.py's own logic without gymnasium, ale-py or ROMs
(none are on the test machines): reward clipping, the life-loss terminal and its no-op
reset, over a fake ALE env; that the module imports without gymnasium; and that the
training env, stepped by python/apex_env.py's Worker as apex-actor's workers step it, gives
the learner per-life episodes of clipped rewards. Prints "OK" and exits 0, or raises.
Run by tests/check_pyenv_image.c (test_atari_factory_logic) from the repo root.

What is not tested here: make() itself (gymnasium's AtariPreprocessing and TransformReward,
the emulator), which needs `pip install "gymnasium[atari]"`.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import apex_atari  # noqa: E402
import apex_env  # noqa: E402


class Box:
    def __init__(self, dtype, shape):
        self.dtype, self.shape = np.dtype(dtype), tuple(shape)


class Discrete:
    def __init__(self, n):
        self.n, self.start = n, 0


class FakeAle:
    """A game of 3 lives, one lost every 4 steps; rewards cycle through REWARDS; frames are
    (84, 84) uint8 whose pixel [0, 0] counts the emulator's steps since the real reset and
    [0, 1] the real resets. Records every call."""

    REWARDS = [0.0, 3.0, -2.0, 0.5, 1.0, -0.25, 7.0, 0.0]

    def __init__(self):
        self.observation_space = Box(np.uint8, (84, 84))
        self.action_space = Discrete(6)
        self.unwrapped = self
        self.calls, self.resets, self.t, self.lives_left = [], 0, 0, 3

    def _obs(self):
        o = np.zeros((84, 84), dtype=np.uint8)
        o[0, 0], o[0, 1] = self.t % 256, self.resets % 256
        return o

    def reset(self, seed=None, options=None):
        self.calls.append(("reset", seed))
        self.resets += 1
        self.t, self.lives_left = 0, 3
        return self._obs(), {}

    def step(self, a):
        self.calls.append(("step", int(a)))
        r = self.REWARDS[self.t % len(self.REWARDS)]
        self.t += 1
        if self.t % 4 == 0:
            self.lives_left -= 1
        return self._obs(), r, self.lives_left == 0, False, {}


def fake_lives(env):
    return env.unwrapped.lives_left


def fake_training(**kw):
    return apex_atari.wrap_training(FakeAle(), lives=fake_lives)


def check_clip():
    cases = [(0, 0.0), (3, 1.0), (-2, -1.0), (0.5, 0.5), (-0.25, -0.25), (1, 1.0), (-1, -1.0),
             (1e9, 1.0), (float("inf"), 1.0), (float("-inf"), -1.0)]
    for r, want in cases:
        got = apex_atari.clip_reward(r)
        assert got == want and type(got) is float, (r, got, want)
    assert apex_atari.clip_reward(float("nan")) != apex_atari.clip_reward(float("nan"))


def check_life_loss():
    ale = FakeAle()
    env = apex_atari.wrap_training(ale, lives=fake_lives)
    assert env.observation_space.shape == (84, 84)
    obs, _ = env.reset(seed=5)
    assert ale.calls == [("reset", 5)] and obs[0, 0] == 0
    episodes = []
    for life in range(3):
        rewards, ended = [], False
        while not ended:
            obs, r, term, trunc, _ = env.step(2)
            rewards.append(r)
            ended = term or trunc
        assert term and not trunc, life
        episodes.append(rewards)
        if life < 2:  # a life lost, the game not over: the reset is a no-op step, not a reset
            n = len(ale.calls)
            obs, _ = env.reset()
            assert ale.calls[n:] == [("step", 0)], ale.calls[n:]
            assert ale.resets == 1 and obs[0, 1] == 1
    # 4 steps a life (the no-op steps after lives 1 and 2 count in the game's own steps)
    assert [len(e) for e in episodes] == [4, 3, 3], episodes
    clipped = [apex_atari.clip_reward(r) for r in FakeAle.REWARDS]
    assert episodes[0] == clipped[0:4], episodes[0]
    assert episodes[1] == clipped[5:8], episodes[1]  # step 4 (index) was the no-op
    # the game is over: the next reset is a real one
    n = len(ale.calls)
    obs, _ = env.reset()
    assert ale.calls[n:] == [("reset", None)] and ale.resets == 2 and obs[0, 0] == 0
    # a seeded reset is always real, even after a lost life
    env.step(1), env.step(1), env.step(1), env.step(1)
    n = len(ale.calls)
    env.reset(seed=9)
    assert ale.calls[n:] == [("reset", 9)]


def check_no_gymnasium():
    try:
        import gymnasium  # noqa: F401
        return  # installed here: make() would build the real thing
    except ImportError:
        pass
    try:
        apex_atari.make("Pong")
    except ImportError as e:
        assert "gymnasium" in str(e), e
    else:
        raise AssertionError("make() without gymnasium")


def check_through_worker():
    """The training env as apex-actor's worker steps it: episodes end at each lost life."""
    w = apex_env.Worker(os.path.abspath(__file__) + ":fake_training", num_envs=1)
    assert w.shape == (84, 84) and w.n_actions == 6 and w.dtype == np.uint8
    st = w.reset_all([11])
    assert st.flags[0] == 0
    ends = []
    for t in range(12):
        st = w.step(0, 1, [3])
        if st.flags[0]:
            ends.append((t, st.flags[0]))
    # lives lost at steps 4, 8 (3 + the no-op), 12 (the game over): terminated and reset
    flags = apex_env.TERMINATED | apex_env.RESET_FLAG
    assert ends == [(3, flags), (6, flags), (9, flags)], ends


if __name__ == "__main__":
    check_clip()
    check_life_loss()
    check_no_gymnasium()
    check_through_worker()
    print("OK")
